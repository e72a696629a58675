package httpbank

import (
	"bytes"
	"context"
	"errors"
	"github.com/slipverify/slipverify/core/bank/banktest"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
)

// now is the sandbox's clock in these tests.
var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("ICT", 7*3600))

// sandboxConfig scripts one answer of each kind.
var sandboxConfig = sandbox.Config{
	PendingBank: "006",
	Slips: []sandbox.Slip{
		{BankCode: "004", TransRef: "LISTED1", Amount: 100.5, Date: "2026-11-20T11:35:51+07:00", Ref1: "INV-7",
			Sender: bank.Party{Bank: bank.BankRef{ID: "004", Name: "Kasikorn Bank", Short: "KBANK"}},
			Receiver: bank.Receiver{Bank: bank.BankRef{ID: "014", Short: "SCB"},
				Account: bank.Account{Name: bank.AccountName{TH: "บริษัท ทดสอบสลิป จำกัด"}}}},
		{BankCode: "006", TransRef: "PENDING1", Amount: 10, Date: now.Format(time.RFC3339)},
	},
	NotFound:      []string{"NF1", "WNF1"},
	UpstreamError: []string{"UE1", "WUE1"},
	Wallet: []bank.WalletSlip{{TransactionID: "57283950822875", Amount: 50, Date: "2026-11-20T11:35:51+07:00",
		Sender: bank.WalletParty{Name: "นาย ทดสอบ วอลเล็ต", Phone: "081-xxx-1234"}}},
}

func newSandbox(t testing.TB) *sandbox.Bank {
	t.Helper()
	sb, err := sandbox.New(sandboxConfig, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func newConnector(t testing.TB, cfg Config) *Connector {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

// counted serves h on a real listener and counts the requests that reach it.
func counted(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestSandboxThroughGateway runs the sandbox behind Handler on a real
// listener and asks it through Connector: every answer must come out as the
// sandbox gives it directly.
func TestSandboxThroughGateway(t *testing.T) {
	sb := newSandbox(t)
	srv, _ := counted(t, Handler(sb))
	c := newConnector(t, Config{URL: srv.URL})
	ctx := context.Background()

	bankTests := []struct {
		name, bankCode, transRef string
		wantErr                  error
	}{
		{"listed", "004", "LISTED1", nil},
		{"synthetic", "014", "SYNTHETIC42", nil},
		{"not found", "004", "NF1", bank.ErrNotFound},
		{"unknown bank", "999", "ANY", bank.ErrNotFound},
		{"pending", "006", "PENDING1", bank.ErrPending},
		{"upstream error", "004", "UE1", bank.ErrUpstream},
	}
	for _, tt := range bankTests {
		t.Run("bank/"+tt.name, func(t *testing.T) {
			got, err := c.Bank(ctx, tt.bankCode, tt.transRef)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			direct, _ := sb.Bank(ctx, tt.bankCode, tt.transRef)
			if !reflect.DeepEqual(got, direct) {
				t.Errorf("through the gateway\n%+v\ndirect\n%+v", got, direct)
			}
		})
	}

	walletTests := []struct {
		name, id string
		wantErr  error
	}{
		{"listed", "57283950822875", nil},
		{"synthetic", "50011234567890", nil},
		{"not found", "WNF1", bank.ErrNotFound},
		{"upstream error", "WUE1", bank.ErrUpstream},
	}
	for _, tt := range walletTests {
		t.Run("wallet/"+tt.name, func(t *testing.T) {
			got, err := c.Wallet(ctx, tt.id)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			direct, _ := sb.Wallet(ctx, tt.id)
			if got != direct {
				t.Errorf("through the gateway %+v, direct %+v", got, direct)
			}
		})
	}
}

// TestWireProtocol pins what the connector sends: method, path below the
// base URL's path, headers and body.
func TestWireProtocol(t *testing.T) {
	type seen struct{ method, path, contentType, body string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(body)}
		_, _ = io.WriteString(w, `{"status":"not_found"}`)
	}))
	defer srv.Close()

	tests := []struct {
		base string
		call func(c *Connector) error
		want seen
	}{
		{srv.URL, func(c *Connector) error { _, err := c.Bank(context.Background(), "004", "LS2F\"LL"); return err },
			seen{"POST", "/slips/bank", "application/json", `{"bankCode":"004","transRef":"LS2F\"LL"}`}},
		{srv.URL + "/gw/", func(c *Connector) error { _, err := c.Bank(context.Background(), "014", "R1"); return err },
			seen{"POST", "/gw/slips/bank", "application/json", `{"bankCode":"014","transRef":"R1"}`}},
		{srv.URL + "/gw", func(c *Connector) error { _, err := c.Wallet(context.Background(), "5728"); return err },
			seen{"POST", "/gw/slips/wallet", "application/json", `{"transactionId":"5728"}`}},
	}
	for _, tt := range tests {
		c := newConnector(t, Config{URL: tt.base})
		if err := tt.call(c); !errors.Is(err, bank.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tt.base, err)
		}
		if s := <-got; s != tt.want {
			t.Errorf("%s: request %+v, want %+v", tt.base, s, tt.want)
		}
	}
}

// TestHandlerUnderPrefix serves Handler below a path, as a gateway mounted
// next to other routes would be.
func TestHandlerUnderPrefix(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/gw/", http.StripPrefix("/gw", Handler(newSandbox(t))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newConnector(t, Config{URL: srv.URL + "/gw"})
	if s, err := c.Bank(context.Background(), "004", "LISTED1"); err != nil || s.Ref1 != "INV-7" {
		t.Errorf("Bank = %+v, %v", s, err)
	}
}

// foundReply is a valid reply for transRef "R1".
const foundReply = `{"status":"found","slip":{"transRef":"R1","date":"2026-11-20T11:35:51+07:00","amount":{"amount":1,"local":{"amount":1,"currency":"THB"}}}}`

// TestUpstreamFailures: every bad answer of a gateway is ErrUpstream, after
// exactly one request.
func TestUpstreamFailures(t *testing.T) {
	reply := func(code int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		detail  string // part of the error text
	}{
		{"500", reply(500, `{"status":"found"}`), "HTTP 500"},
		{"502 from Handler", reply(502, `{"status":"error","message":"upstream error"}`), "HTTP 502"},
		{"204", reply(204, ""), "HTTP 204"},
		{"404", reply(404, "404 page not found"), "HTTP 404"},
		{"redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, "HTTP 307"},
		{"malformed JSON", reply(200, `{"status":"found","slip":`), "malformed reply"},
		{"empty body", reply(200, ""), "malformed reply"},
		{"HTML", reply(200, "<html>maintenance</html>"), "malformed reply"},
		{"trailing data", reply(200, `{"status":"not_found"} {}`), "malformed reply"},
		{"JSON array", reply(200, `[]`), "malformed reply"},
		{"unknown status", reply(200, `{"status":"maybe"}`), `unknown reply status "maybe"`},
		{"no status", reply(200, `{}`), `unknown reply status ""`},
		{"error status with 200", reply(200, `{"status":"error","message":"bank down"}`), `gateway error: "bank down"`},
		{"found without slip", reply(200, `{"status":"found"}`), "without a slip"},
		{"found with null slip", reply(200, `{"status":"found","slip":null}`), "without a slip"},
		{"slip of another transfer", reply(200, strings.Replace(foundReply, `"R1"`, `"R2"`, 1)), `reply is for "R2"`},
		{"slip of wrong type", reply(200, `{"status":"found","slip":{"transRef":"R1","amount":"ten"}}`), "malformed reply"},
		{"oversize body", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"status":"found","slip":{"transRef":"R1","ref1":"`)
			_, _ = w.Write(bytes.Repeat([]byte("a"), MaxReplySize))
			_, _ = io.WriteString(w, `"}}`)
		}, "reply exceeds 1048576 bytes"},
		{"connection dropped", hangUp, "EOF"},
		{"body cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, `{"status":"found"`)
			hangUpAfterFlush(w)
		}, "read reply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, n := counted(t, tt.handler)
			c := newConnector(t, Config{URL: srv.URL, Timeout: 5 * time.Second})
			_, err := c.Bank(context.Background(), "004", "R1")
			if !errors.Is(err, bank.ErrUpstream) {
				t.Fatalf("err = %v, want ErrUpstream", err)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("err = %q, want it to mention %q", err, tt.detail)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("%d requests reached the gateway, want 1", got)
			}
		})
	}
}

// hangUp closes the connection without answering.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// hangUpAfterFlush sends what w holds, then closes the connection.
func hangUpAfterFlush(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, buf, err := rc.Hijack()
	if err != nil {
		panic(err)
	}
	_ = buf.Flush()
	_ = conn.Close()
}

// TestReplySizeLimit: a reply of exactly MaxReplySize bytes is read, one
// byte more is refused.
func TestReplySizeLimit(t *testing.T) {
	tests := []struct {
		size    int
		wantErr error
	}{
		{MaxReplySize, nil},
		{MaxReplySize + 1, bank.ErrUpstream},
	}
	for _, tt := range tests {
		// JSON allows trailing white space: pad a valid reply to size.
		body := foundReply + strings.Repeat(" ", tt.size-len(foundReply))
		srv, _ := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, body)
		}))
		c := newConnector(t, Config{URL: srv.URL})
		s, err := c.Bank(context.Background(), "004", "R1")
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && (err != nil || s.TransRef != "R1")) {
			t.Errorf("reply of %d bytes: %+v, %v; want err %v", tt.size, s, err, tt.wantErr)
		}
	}
}

// hanging is a gateway that reads the request and then never answers, until
// the client goes away or the test ends. arrived receives each request.
func hanging(t *testing.T) (*httptest.Server, *atomic.Int64, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	srv, n := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets the server notice the client
		// closing the connection, which cancels r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, n, arrived
}

func TestTimeout(t *testing.T) {
	srv, n, _ := hanging(t)
	c := newConnector(t, Config{URL: srv.URL, Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := c.Bank(context.Background(), "004", "R1")
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUpstream and DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("call took %v with a 50ms timeout", elapsed)
	}
	_, err = c.Wallet(context.Background(), "W1")
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wallet err = %v, want ErrUpstream and DeadlineExceeded", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d requests for 2 calls", got)
	}
}

func TestCallerCancellation(t *testing.T) {
	srv, n, arrived := hanging(t)
	c := newConnector(t, Config{URL: srv.URL, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.Bank(ctx, "004", "R1")
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrUpstream and Canceled", err)
	}
	// A call with a context already cancelled sends nothing.
	if _, err := c.Wallet(ctx, "W1"); !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrUpstream and Canceled", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

func TestClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := newConnector(t, Config{URL: "http://" + addr, Timeout: 5 * time.Second})
	_, err = c.Bank(context.Background(), "004", "R1")
	var opErr *net.OpError
	if !errors.Is(err, bank.ErrUpstream) || !errors.As(err, &opErr) {
		t.Fatalf("err = %v, want ErrUpstream with a network error", err)
	}
}

// TestNoRetry proves that each call reaches the gateway exactly once, on
// every kind of failure, including a keep-alive connection closed by the
// server after it read the request, which net/http resends for idempotent
// requests.
func TestNoRetry(t *testing.T) {
	var mode atomic.Value // string
	release := make(chan struct{})
	srv, n := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch mode.Load() {
		case "ok":
			_, _ = io.WriteString(w, foundReply)
		case "500":
			w.WriteHeader(500)
		case "hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "hang up":
			hangUp(w, r)
		}
	}))
	t.Cleanup(func() { close(release) })
	// Both connectors share one transport, so one pool of keep-alive
	// connections: fast for the hanging gateway, slow with a timeout that a
	// busy machine cannot exceed for the calls that must succeed.
	client := &http.Client{Transport: newTransport()}
	fast := newConnector(t, Config{URL: srv.URL, Timeout: 50 * time.Millisecond, Client: client})
	slow := newConnector(t, Config{URL: srv.URL, Timeout: time.Minute, Client: client})

	for i, m := range []string{"ok", "500", "ok", "hang", "ok", "hang up", "ok", "500", "hang up"} {
		mode.Store(m)
		before := n.Load()
		cc := slow
		if m == "hang" {
			cc = fast
		}
		_, err := cc.Bank(context.Background(), "004", "R1")
		if (m == "ok") != (err == nil) {
			t.Errorf("call %d (%s): err = %v", i, m, err)
		}
		if got := n.Load() - before; got != 1 {
			t.Errorf("call %d (%s): %d requests for one call, want 1", i, m, got)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"http", Config{URL: "http://127.0.0.1:8090"}, nil},
		{"https with path", Config{URL: "https://gateway.example/v1/", Timeout: time.Second}, nil},
		{"own client", Config{URL: "http://gw", Client: &http.Client{}}, nil},
		{"empty", Config{}, []string{"scheme must be http or https"}},
		{"ftp", Config{URL: "ftp://gw"}, []string{"scheme must be http or https"}},
		{"no scheme", Config{URL: "gateway.example:8080"}, []string{"scheme must be http or https"}},
		{"no host", Config{URL: "http:///path"}, []string{"no host"}},
		{"unparsable", Config{URL: "http://[::1"}, []string{"missing ']'"}},
		{"query", Config{URL: "http://gw/?k=v"}, []string{"no query or fragment"}},
		{"negative timeout and bad URL", Config{URL: "gw", Timeout: -time.Second},
			[]string{"scheme must be http or https", "Timeout -1s is negative"}},
	}
	// A URL's password and query may be credentials: an error does not show them.
	for _, u := range []string{"https://user:pw-secret@gw.example/x?token=tok-secret", "ftp://user:pw-secret@gw/?token=tok-secret",
		"http://user:pw-secret@[::1/x?token=tok-secret"} {
		if _, err := New(Config{URL: u}); err == nil || strings.Contains(err.Error(), "pw-secret") || strings.Contains(err.Error(), "tok-secret") {
			t.Errorf("New(%q): %v", u, err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr == nil {
				if err != nil || c == nil {
					t.Fatalf("New = %v, %v", c, err)
				}
				if tt.cfg.Timeout == 0 && c.timeout != DefaultTimeout {
					t.Errorf("timeout = %v, want %v", c.timeout, DefaultTimeout)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted the config")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// TestOwnClientKeepsItsRedirectPolicy: New must not change the caller's
// client.
func TestOwnClientKeepsItsRedirectPolicy(t *testing.T) {
	own := &http.Client{}
	newConnector(t, Config{URL: "http://gw", Client: own})
	if own.CheckRedirect != nil {
		t.Error("New changed the caller's client")
	}
}

func TestHandlerRequests(t *testing.T) {
	h := Handler(newSandbox(t))
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantBody                 string // prefix
	}{
		{"found", "POST", "/slips/bank", `{"bankCode":"004","transRef":"LISTED1"}`, 200, `{"status":"found","slip":{"transRef":"LISTED1"`},
		{"not found", "POST", "/slips/bank", `{"bankCode":"004","transRef":"NF1"}`, 200, `{"status":"not_found"}`},
		{"pending", "POST", "/slips/bank", `{"bankCode":"006","transRef":"PENDING1"}`, 200, `{"status":"pending"}`},
		{"upstream", "POST", "/slips/bank", `{"bankCode":"004","transRef":"UE1"}`, 502, `{"status":"error","message":"upstream error"}`},
		{"wallet", "POST", "/slips/wallet", `{"transactionId":"57283950822875"}`, 200, `{"status":"found","slip":{"transactionId":"57283950822875"`},
		{"missing transRef", "POST", "/slips/bank", `{"bankCode":"004"}`, 400, `{"status":"error","message":"bankCode and transRef are required"}`},
		{"missing transactionId", "POST", "/slips/wallet", `{"id":"1"}`, 400, `{"status":"error","message":"transactionId is required"}`},
		{"malformed", "POST", "/slips/bank", `{"bankCode":`, 400, `{"status":"error","message":"malformed request body`},
		{"trailing data", "POST", "/slips/bank", `{"bankCode":"004","transRef":"R"}x`, 400, `{"status":"error","message":"malformed request body`},
		{"too large", "POST", "/slips/bank", `{"bankCode":"004","transRef":"` + strings.Repeat("A", maxRequestSize) + `"}`, 413, `{"status":"error","message":"request body exceeds 65536 bytes"}`},
		{"GET", "GET", "/slips/bank", "", 405, ""},
		{"unknown path", "POST", "/slips/card", `{}`, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.wantCode || !strings.HasPrefix(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %.200s, want %d %s", rec.Code, rec.Body, tt.wantCode, tt.wantBody)
			}
			if rec.Code == 200 && rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
		})
	}
}

// FuzzDecodeReply: no reply body makes the decoder panic, and every answer
// is a slip for the reference asked, or one of the connector errors.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{foundReply, `{"status":"not_found"}`, `{"status":"pending"}`,
		`{"status":"error","message":"x"}`, `{"status":"found","slip":null}`, `{`, `null`, `[]`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := decodeReply(body, "R1", func(s *bank.Slip) string { return s.TransRef })
		switch {
		case err == nil:
			if s.TransRef != "R1" {
				t.Fatalf("slip for %q", s.TransRef)
			}
		case errors.Is(err, bank.ErrNotFound), errors.Is(err, bank.ErrPending), errors.Is(err, bank.ErrUpstream):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(Handler(newSandbox(b)))
	defer srv.Close()
	banktest.Benchmark(b, newConnector(b, Config{URL: srv.URL}), banktest.Refs{ListedBank: "004", ListedRef: "LISTED1", NotFoundRef: "NF1"})
}
