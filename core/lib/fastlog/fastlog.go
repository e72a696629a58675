// Package fastlog sends fasthttp's own messages (refused connections,
// malformed requests, bodies over the limit) to a structured log without
// the request text they quote.
package fastlog

import (
	"fmt"
	"log/slog"
	"regexp"
)

// Logger is a fasthttp.Logger writing to Log. Quoted text in the errors it
// is given is replaced: fasthttp quotes parts of a malformed request there,
// such as a header value with its credential, even with
// SecureErrorLogMessage.
type Logger struct{ Log *slog.Logger }

func (l Logger) Printf(format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = quoted.ReplaceAllString(err.Error(), `"…"`)
		}
	}
	l.Log.Warn(fmt.Sprintf(format, args...), "source", "fasthttp")
}

// quoted matches a Go-quoted string (%q).
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
