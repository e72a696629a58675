// Package bankfake serves fakes of the banks' slip verification APIs
// (KBank, SCB, and the aggregator RDCW) over TLS, with a
// client-certificate check where the bank has one, speaking each
// bank's wire format exactly as the connectors' package docs describe it,
// for the connectors' tests and end-to-end tests. Each fake counts the
// lookups it received and injects faults on request.
//
// The slips the fakes know are the golden examples in testdata: the
// switch's data object as KBank sends it (amounts as numbers) and as SCB
// sends it (every field a string). KBankSlips and SCBSlips list them with
// the slip a connector answers for each.
package bankfake

import (
	"crypto/tls"
	"embed"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

//go:embed testdata/*.json
var testdata embed.FS

// Example returns the data object of a golden example by file name
// (kbank_interbank.json, say).
func Example(name string) json.RawMessage {
	b, err := testdata.ReadFile("testdata/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// T is what the fakes need of their test: a *testing.T or *testing.B, or
// cmd/bankfake's logger when the fakes serve the dev stack. A wire-format
// violation is reported with Errorf.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Fault is what a fake does to the next lookup instead of answering it.
type Fault int

// The faults a fake injects.
const (
	// ExpiredToken answers as for an expired token (KBank HTTP 401, SCB
	// status 9300) and forgets every token it issued. The bank ran
	// nothing: the lookup is not billed.
	ExpiredToken Fault = iota + 1
	// TooMany answers HTTP 429, not billed.
	TooMany
	// NotFound answers the bank's not-found code (KBank 8404, SCB 1104).
	NotFound
	// SwitchFailure answers 8503, switch to bank failure.
	SwitchFailure
	// SlowBody sends the headers and half the body, then waits for the
	// client to leave.
	SlowBody
	// Reset reads the request and resets the connection.
	Reset
	// Malformed answers 200 with a body that is not JSON.
	Malformed
)

// fake is what both fakes share: the examples by transRef, the scripted
// faults, the issued tokens and the counters.
type fake struct {
	t   T
	srv *httptest.Server

	mu       sync.Mutex
	slips    map[string]json.RawMessage
	faults   []Fault
	tokens   map[string]bool
	nToken   int
	lookups  int // lookups the bank ran (billed), faults Reset and SlowBody included
	requests int // lookup requests received, refused ones included
	expires  any // expires value the token endpoint sends

	slow map[string]chan<- string // refs answered slowly (Slow), and who hears of each lookup
}

func newFake(t T, pki *PKI, h http.Handler) *fake {
	return newFakeTLS(t, pki.ServerTLS(), h)
}

func newFakeTLS(t T, tc *tls.Config, h http.Handler) *fake {
	f := &fake{t: t, slips: map[string]json.RawMessage{}, tokens: map[string]bool{}, slow: map[string]chan<- string{}}
	f.srv = httptest.NewUnstartedServer(h)
	f.srv.TLS = tc
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// addKnown lists the examples of known, each under its data object's
// transRef.
func (f *fake) addKnown(known []Known) {
	for _, k := range known {
		data := Example(k.File)
		var d struct {
			TransRef string `json:"transRef"`
		}
		if err := json.Unmarshal(data, &d); err != nil || d.TransRef != k.Slip.TransRef {
			f.t.Fatalf("bankfake: %s: transRef %q, its slip's %q: %v", k.File, d.TransRef, k.Slip.TransRef, err)
		}
		f.mu.Lock()
		f.slips[d.TransRef] = data
		f.mu.Unlock()
	}
}

// issue returns a new token.
func (f *fake) issue() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nToken++
	tok := "tok" + strconv.Itoa(f.nToken)
	f.tokens[tok] = true
	return tok
}

// take counts a lookup request with token and returns the fault scripted
// for it (SlowBody for a ref made slow), whether the token is valid, and
// the slip of ref.
func (f *fake) take(token, ref string) (Fault, bool, json.RawMessage) {
	f.mu.Lock()
	f.requests++
	var fault Fault
	if len(f.faults) > 0 {
		fault, f.faults = f.faults[0], f.faults[1:]
	}
	valid := f.tokens[token]
	switch {
	case fault == ExpiredToken:
		clear(f.tokens)
		f.mu.Unlock()
		return fault, false, nil
	case !valid || fault == TooMany:
		f.mu.Unlock()
		return fault, valid, nil
	}
	f.lookups++
	arrived, slow := f.slow[ref]
	if fault == 0 && slow {
		fault = SlowBody
	}
	data := f.slips[ref]
	f.mu.Unlock()
	if fault == SlowBody && arrived != nil {
		arrived <- ref // outside the lock: the listener may be a test waiting for several
	}
	return fault, true, data
}

// Slow is the fake's slow mode: from now on every lookup of ref (that no
// scripted fault answers) is answered as SlowBody answers one, holding
// the client until it leaves: a bank that is slow for some slips, as
// banks are when one merchant's transfers hit a slow path. Each such
// lookup, once the bank has run it, sends ref on arrived (nil: nobody
// listens), which must have room or a reader, so a test learns without
// waiting for time that the lookups it started are in the bank's hands.
func (f *fake) Slow(ref string, arrived chan<- string) {
	f.mu.Lock()
	f.slow[ref] = arrived
	f.mu.Unlock()
}

// Inject scripts faults for the next lookups, one each, in order.
func (f *fake) Inject(faults ...Fault) {
	f.mu.Lock()
	f.faults = append(f.faults, faults...)
	f.mu.Unlock()
}

// Lookups returns the lookups the bank ran, each one billed.
func (f *fake) Lookups() int { f.mu.Lock(); defer f.mu.Unlock(); return f.lookups }

// Requests returns the lookup requests received, refused ones included.
func (f *fake) Requests() int { f.mu.Lock(); defer f.mu.Unlock(); return f.requests }

// Tokens returns the tokens issued.
func (f *fake) Tokens() int { f.mu.Lock(); defer f.mu.Unlock(); return f.nToken }

// URL is the fake's base URL.
func (f *fake) URL() string { return f.srv.URL }

// SetExpiresIn sets the expiry the token endpoint sends (a number or a
// string of seconds).
func (f *fake) SetExpiresIn(v any) { f.mu.Lock(); f.expires = v; f.mu.Unlock() }

func (f *fake) expiresIn(def any) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.expires != nil {
		return f.expires
	}
	return def
}

// slow writes half of body and waits for the client to leave.
func slow(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// reset drops the connection with a TCP RST after the request was read.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
