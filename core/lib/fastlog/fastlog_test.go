package fastlog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestQuotedRequestTextNeverLogged(t *testing.T) {
	var out bytes.Buffer
	l := Logger{Log: slog.New(slog.NewJSONHandler(&out, nil))}
	err := errors.New(`cannot parse header "Authorization: Bearer 0f8a\"secret\"-key" at line 2`)
	l.Printf("error when serving connection %q<->%q: %v", "127.0.0.1:8080", "127.0.0.1:5555", err)
	got := out.String()
	if strings.Contains(got, "0f8a") || strings.Contains(got, "secret") {
		t.Fatalf("the request's text reached the log: %s", got)
	}
	if !strings.Contains(got, "cannot parse header") || !strings.Contains(got, `"source":"fasthttp"`) {
		t.Fatalf("the message itself is missing: %s", got)
	}
}
