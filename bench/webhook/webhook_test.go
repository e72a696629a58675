package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestReceiver posts callbacks over TLS, trusting only the receiver's CA as
// core does: before and after their job is expected, repeated, unsigned,
// unknown and malformed.
func TestReceiver(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pemCA, _ := os.ReadFile(r.CAFile)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		t.Fatal("CA file is not PEM")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(body, sig string) int {
		req, _ := http.NewRequest("POST", r.URL, bytes.NewReader([]byte(body)))
		req.Header.Set("X-Service-Signature", sig)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	const secret = "whsec_0123456789abcdef"
	due := time.Now().Add(-50 * time.Millisecond)
	r.Expect("job-1", due, secret)
	b1 := `{"jobId":"job-1","batchId":null,"status":"success","data":{},"timestamp":"2026-01-01T00:00:00Z"}`
	b2 := `{"jobId":"job-2","status":"failed","error":{"code":"QUOTA_EXCEEDED"}}`
	if post(b1, sign(secret, []byte(b1))) != 200 || post(b1, sign(secret, []byte(b1))) != 200 {
		t.Fatal("callback refused")
	}
	post(b2, "sha256=00") // arrives before its job is expected, badly signed
	r.Expect("job-2", due, secret)
	r.Expect("job-3", due, secret)
	b3 := `{"jobId":"job-3","batchId":null,"status":"success","data":{}}`
	post(b3, sign("another-secret", []byte(b3))) // a success no receiver would believe
	post(`{"jobId":"job-9","status":"success"}`, "")
	if post(`not json`, "") != 400 {
		t.Error("a malformed callback was accepted")
	}
	if !r.Wait(time.Now().Add(5 * time.Second)) {
		t.Fatalf("pending %d", r.Pending())
	}
	s := r.Stats()
	if s.Expected != 3 || s.Delivered != 3 || s.Repeats != 1 || s.BadSig != 2 || s.Unknown != 1 || s.Malformed != 1 {
		t.Errorf("stats %+v", s)
	}
	// One job succeeded, one failed and one's success was badly signed: the
	// repeat and the unknown job's callback are no further verifications,
	// and neither a failed one nor a badly signed one is one.
	if s.Succeeded != 1 || len(s.Status) != 2 || s.Status["success"] != 2 || s.Status["failed QUOTA_EXCEEDED"] != 1 {
		t.Errorf("succeeded %d, by status %v; want 1, success ×2 and failed QUOTA_EXCEEDED ×1", s.Succeeded, s.Status)
	}
	if s.LastSuccess.Before(due) || s.LastSuccess.After(time.Now()) {
		t.Errorf("last success at %v, not when job-1's callback arrived", s.LastSuccess)
	}
	if r.Latency().Count() != 3 || r.Latency().Quantile(0) < 50*time.Millisecond {
		t.Errorf("latency count %d min %v: not measured from the due time", r.Latency().Count(), r.Latency().Quantile(0))
	}
	r.Reset()
	if r.Pending() != 0 || r.Latency().Count() != 0 || r.Stats().Delivered != 0 {
		t.Error("Reset kept counts")
	}
	// A second receiver from the same directory reuses the CA.
	r2, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r = r2
	if post(b1, sign(secret, []byte(b1))) != 200 {
		t.Error("the second receiver's certificate is not trusted through the same CA")
	}
}

// TestExpectTwice expects job ids twice, before and after their callback
// arrived, as a submit answer read twice would: each is one job, so once
// its one callback is in none is pending and none missing.
func TestExpectTwice(t *testing.T) {
	r, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	due := time.Now()
	r.Expect("job-1", due, "s")
	r.Expect("job-1", due, "s")
	callback := func(body string) {
		req := httptest.NewRequest("POST", "/hook", strings.NewReader(body))
		req.Header.Set("X-Service-Signature", sign("s", []byte(body)))
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
	callback(`{"jobId":"job-2","status":"success"}`) // before its job is expected
	r.Expect("job-2", due, "s")
	r.Expect("job-2", due, "s")
	callback(`{"jobId":"job-1","status":"success"}`)
	if s := r.Stats(); s.Expected != 2 || s.Delivered != 2 || s.Succeeded != 2 || r.Pending() != 0 {
		t.Errorf("expected %d, delivered %d, succeeded %d, pending %d; want 2, 2, 2 and none pending", s.Expected, s.Delivered, s.Succeeded, r.Pending())
	}
}

func TestValid(t *testing.T) {
	body := []byte(`{"a":1}`)
	if !Valid("k", body, sign("k", body)) || Valid("k", body, sign("x", body)) || Valid("k", body, "sha256=zz") || Valid("k", body, "") {
		t.Error("Valid is wrong")
	}
}

// TestMakeCA makes the CA before any receiver, as a user does before
// starting the stack: it is made once and kept, a receiver started from
// the directory later is trusted through it, and a CA without its key is
// refused rather than replaced.
func TestMakeCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wh")
	if err := CheckCA(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckCA of an empty directory: %v", err)
	}
	caFile, made, err := MakeCA(dir)
	if err != nil || !made || caFile != filepath.Join(dir, CAFile) {
		t.Fatalf("MakeCA: %q %v %v", caFile, made, err)
	}
	before, _ := os.ReadFile(caFile)
	if _, made, err := MakeCA(dir); err != nil || made {
		t.Errorf("second MakeCA: made %v, %v; want the CA kept", made, err)
	}
	if after, _ := os.ReadFile(caFile); !bytes.Equal(before, after) || CheckCA(dir) != nil {
		t.Error("the CA changed, or does not load")
	}
	r, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(before)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := c.Post(r.URL, "application/json", bytes.NewReader([]byte(`{"jobId":"job-1","status":"success"}`)))
	if err != nil {
		t.Fatalf("the receiver is not trusted through the CA made before it: %v", err)
	}
	res.Body.Close()
	os.Remove(filepath.Join(dir, CAKeyFile))
	if _, _, err := MakeCA(dir); err == nil {
		t.Error("a CA without its key was accepted")
	}
	if after, _ := os.ReadFile(caFile); !bytes.Equal(before, after) {
		t.Error("a CA without its key was replaced")
	}
}
