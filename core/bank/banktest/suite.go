package banktest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// Fake is a bank's fake (package bankfake) as the suite drives it.
type Fake interface {
	URL() string
	Inject(faults ...bankfake.Fault)
	SetExpiresIn(v any)
	Lookups() int  // run by the bank, each billed
	Requests() int // lookup requests received, refused ones included
	Tokens() int   // tokens issued
}

// Settings are what every connector to a bank's own API is configured
// with.
type Settings struct {
	URL, ID, Secret string
	TLS             upstream.TLS
	Timeout         time.Duration
	Now             func() time.Time
}

// Suite is what the conformance suite knows of one bank's connector: the
// rest is the same for every bank. Run runs it.
type Suite struct {
	// Prefix names the connector's settings (SLIP_KBANK); Credentials
	// names its id and secret settings after the prefix (CLIENT_ID,
	// CLIENT_SECRET).
	Prefix      string
	Credentials [2]string
	// ID and Secret are the credentials the fake accepts.
	ID, Secret string
	// Fake starts the bank's fake with pki's certificates.
	Fake func(t bankfake.T, pki *bankfake.PKI) Fake
	// New returns the connector s configures.
	New func(s Settings) (bank.Connector, error)
	// Tokens: the bank hands out OAuth tokens. ClientCert: it takes only
	// callers with a client certificate.
	Tokens, ClientCert bool
	// Trace is the name of the trace id that the error of every lookup
	// sent to the bank carries (rqUID); empty when the bank has none.
	Trace string
	// Codes are the words of the bank's own in the errors of the faults
	// it answers with a code of its: TooMany, NotFound, SwitchFailure.
	Codes map[bankfake.Fault][]string
	// Slips are the slips the fake knows; the first is the suite's
	// everyday lookup.
	Slips []bankfake.Known
}

// rig is a connector under test, the fake it asks and its clock.
type rig struct {
	conn  bank.Connector
	fake  Fake
	clock *testnet.Clock
}

// start starts the fake and a connector asking it with timeout, with the
// client certificate unless noCert.
func (s Suite) start(t bankfake.T, timeout time.Duration, noCert bool) rig {
	t.Helper()
	pki := bankfake.NewPKI(t)
	fake := s.Fake(t, pki)
	clock := testnet.NewClock(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC))
	files := upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile}
	if noCert {
		files.CertFile, files.KeyFile = "", ""
	}
	c, err := s.New(Settings{URL: fake.URL(), ID: s.ID, Secret: s.Secret, TLS: files, Timeout: timeout, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return rig{c, fake, clock}
}

// lookup looks up the suite's everyday slip.
func (s Suite) lookup(c bank.Connector) error {
	_, err := c.Bank(context.Background(), s.Slips[0].BankCode, s.Slips[0].Slip.TransRef)
	return err
}

// issued is how many tokens n lookups with valid tokens fetch: one, for a
// bank that has tokens.
func (s Suite) issued() int {
	if s.Tokens {
		return 1
	}
	return 0
}

// Run runs the conformance suite: what every connector to a bank's own
// API does, against the bank's fake over TLS.
func (s Suite) Run(t *testing.T) {
	t.Run("Examples", s.examples)
	t.Run("NewReportsEveryProblem", s.newReportsEveryProblem)
	t.Run("Faults", s.faults)
	t.Run("NotFoundIsNotRepeated", s.notFoundIsNotRepeated)
	t.Run("BadLookupIsNotSent", s.badLookupIsNotSent)
	t.Run("ConcurrentCallers", s.concurrentCallers)
	if s.Tokens {
		t.Run("TokenRefreshedBeforeExpiry", s.tokenRefreshedBeforeExpiry)
		t.Run("ExpiredTokenRepeatsOnce", s.expiredTokenRepeatsOnce)
	}
	if s.ClientCert {
		t.Run("ClientCertificateRequired", s.clientCertificateRequired)
	}
}

// examples: each slip the fake knows is answered as it is, with one billed
// lookup each and one token for all.
func (s Suite) examples(t *testing.T) {
	r := s.start(t, 5*time.Second, false)
	for _, k := range s.Slips {
		got, err := r.conn.Bank(context.Background(), k.BankCode, k.Slip.TransRef)
		if err != nil {
			t.Fatalf("%s: %v", k.File, err)
		}
		if !reflect.DeepEqual(k.Slip, got) {
			t.Errorf("%s: slip\n got %s\nwant %s", k.File, got.AppendJSON(nil), k.Slip.AppendJSON(nil))
		}
	}
	if got := r.fake.Lookups(); got != len(s.Slips) {
		t.Errorf("bank ran %d lookups for %d verifications, want %d", got, len(s.Slips), len(s.Slips))
	}
	if got := r.fake.Tokens(); got != s.issued() {
		t.Errorf("%d tokens fetched, want %d", got, s.issued())
	}
}

// newReportsEveryProblem: New names every setting that is wrong at once.
func (s Suite) newReportsEveryProblem(t *testing.T) {
	id, secret := s.Prefix+"_"+s.Credentials[0], s.Prefix+"_"+s.Credentials[1]
	certAndKey := s.Prefix + "_CERT_FILE and " + s.Prefix + "_KEY_FILE"
	for _, tc := range []struct {
		url      string
		files    upstream.TLS
		want     []string // for every bank
		wantCert []string // for a bank that takes a client certificate
	}{
		{"suba.rdcw.co.th", upstream.TLS{}, []string{s.Prefix + "_URL", id, secret}, nil},
		{"ftp://x", upstream.TLS{CertFile: "a"}, []string{s.Prefix + "_URL", id, secret}, []string{certAndKey}},
		{"https://x/p?q=1", upstream.TLS{KeyFile: "k", CAFile: "/nonexistent"},
			[]string{s.Prefix + "_URL", id, secret, s.Prefix + "_CA_FILE"}, []string{certAndKey}},
	} {
		_, err := s.New(Settings{URL: tc.url, TLS: tc.files})
		want := tc.want
		if s.ClientCert {
			want = append(want, tc.wantCert...)
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v lacks %s", tc.url, err, w)
			}
		}
	}
}

// faults: every fault is one request at the bank, never repeated, and the
// right error; the bank's code and trace ids are in the error text, its
// secret is not.
func (s Suite) faults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  bankfake.Fault
		want   error
		billed int
		words  []string // in every bank's error, besides its Codes and Trace
	}{
		{"too many", bankfake.TooMany, bank.ErrUpstream, 0, nil},
		{"not found", bankfake.NotFound, bank.ErrNotFound, 1, nil},
		{"switch failure", bankfake.SwitchFailure, bank.ErrUpstream, 1, nil},
		{"slow body", bankfake.SlowBody, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"reset", bankfake.Reset, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"malformed", bankfake.Malformed, bank.ErrUpstream, 1, []string{"malformed reply"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words := append(append([]string(nil), tc.words...), s.Codes[tc.fault]...)
			if len(words) == 0 {
				t.Fatal("no words to look for in the error: the suite lacks the bank's Codes")
			}
			if s.Trace != "" {
				words = append(words, s.Trace)
			}
			r := s.start(t, 500*time.Millisecond, false)
			// A first lookup leaves a kept-alive connection, which
			// net/http would be tempted to resend a request on.
			if err := s.lookup(r.conn); err != nil {
				t.Fatal(err)
			}
			r.fake.Inject(tc.fault)
			err := s.lookup(r.conn)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			for _, w := range words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := r.fake.Requests(); got != 2 {
				t.Errorf("%d lookup requests, want 2: the faulted one was sent again", got)
			}
			if got := r.fake.Lookups() - 1; got != tc.billed {
				t.Errorf("%d billed lookups for the fault, want %d", got, tc.billed)
			}
			if strings.Contains(err.Error(), s.Secret) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

// notFoundIsNotRepeated: a reference the bank does not know is one
// request, answered not found.
func (s Suite) notFoundIsNotRepeated(t *testing.T) {
	r := s.start(t, 5*time.Second, false)
	_, err := r.conn.Bank(context.Background(), "004", "NOSUCHREF0001")
	if !errors.Is(err, bank.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	if r.fake.Requests() != 1 {
		t.Errorf("%d lookups sent, want 1", r.fake.Requests())
	}
}

// badLookupIsNotSent: a lookup no slip could carry never reaches the bank.
func (s Suite) badLookupIsNotSent(t *testing.T) {
	r := s.start(t, 5*time.Second, false)
	for _, in := range [][2]string{{"4", "ABC"}, {"004", ""}, {"004", "A/B"}, {"004", strings.Repeat("A", 65)}} {
		if _, err := r.conn.Bank(context.Background(), in[0], in[1]); !errors.Is(err, bank.ErrUpstream) {
			t.Errorf("%q: err %v, want ErrUpstream", in, err)
		}
	}
	if r.fake.Requests() != 0 || r.fake.Tokens() != 0 {
		t.Errorf("invalid lookups reached the bank: %d requests, %d tokens", r.fake.Requests(), r.fake.Tokens())
	}
}

// concurrentCallers: 32 callers at once are 32 lookups; those that find no
// token wait for one fetch.
func (s Suite) concurrentCallers(t *testing.T) {
	r := s.start(t, 5*time.Second, false)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.lookup(r.conn); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := r.fake.Tokens(); got != s.issued() {
		t.Errorf("%d token fetches for 32 concurrent callers, want %d", got, s.issued())
	}
	if got := r.fake.Lookups(); got != 32 {
		t.Errorf("%d lookups, want 32", got)
	}
}

// tokenRefreshedBeforeExpiry: a token is fetched again from 80% of its
// life (at most a minute early) while lookups go on with the old one, and
// the old one is no longer sent in the last 5% of its life (at most 10 s):
// no lookup is sent with an expired token.
func (s Suite) tokenRefreshedBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		expiresIn     any           // as the token endpoint sends it
		renew, expire time.Duration // into its life: a refresh starts; the old token is no longer sent
	}{
		{"100", 80 * time.Second, 95 * time.Second},
		{100, 80 * time.Second, 95 * time.Second},
		{100.0, 80 * time.Second, 95 * time.Second},
		{" 100 ", 80 * time.Second, 95 * time.Second},
		{"600", 540 * time.Second, 590 * time.Second},
		{600, 540 * time.Second, 590 * time.Second},
	} {
		t.Run(fmt.Sprintf("%T %#v", tc.expiresIn, tc.expiresIn), func(t *testing.T) {
			r := s.start(t, 5*time.Second, false)
			r.fake.SetExpiresIn(tc.expiresIn)
			lookup := func() {
				t.Helper()
				if err := s.lookup(r.conn); err != nil {
					t.Fatal(err)
				}
			}
			lookup()
			r.clock.Advance(tc.renew - time.Second)
			lookup()
			if got := r.fake.Tokens(); got != 1 {
				t.Fatalf("a second before the refresh: %d tokens, want 1", got)
			}
			r.clock.Advance(2 * time.Second) // the old token goes on, a new one is fetched behind
			lookup()
			r.clock.Advance(tc.expire - tc.renew) // a second past: the old token is no longer sent
			lookup()
			if got := r.fake.Tokens(); got != 2 {
				t.Fatalf("%d tokens, want 2 (one refresh before expiry)", got)
			}
			if r.fake.Requests() != 4 || r.fake.Lookups() != 4 {
				t.Errorf("%d lookups sent, %d run, want 4: every lookup had a valid token", r.fake.Requests(), r.fake.Lookups())
			}
		})
	}
}

// expiredTokenRepeatsOnce: the bank refused the token and ran nothing, so
// the lookup is sent once more with a new token; a second refusal ends,
// with the trace id of the lookup refused.
func (s Suite) expiredTokenRepeatsOnce(t *testing.T) {
	r := s.start(t, 5*time.Second, false)
	r.fake.Inject(bankfake.ExpiredToken)
	if err := s.lookup(r.conn); err != nil {
		t.Fatal(err)
	}
	if r.fake.Requests() != 2 || r.fake.Lookups() != 1 || r.fake.Tokens() != 2 {
		t.Errorf("requests %d lookups %d tokens %d, want 2, 1 and 2", r.fake.Requests(), r.fake.Lookups(), r.fake.Tokens())
	}

	r.fake.Inject(bankfake.ExpiredToken, bankfake.ExpiredToken)
	err := s.lookup(r.conn)
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, upstream.ErrTokenRefused) {
		t.Fatalf("err %v, want ErrUpstream and ErrTokenRefused", err)
	}
	if s.Trace != "" && !strings.Contains(err.Error(), s.Trace) {
		t.Errorf("error %q lacks %q", err, s.Trace)
	}
	if r.fake.Requests() != 4 || r.fake.Lookups() != 1 {
		t.Errorf("requests %d lookups %d, want 4 and 1: one repeat only, nothing billed", r.fake.Requests(), r.fake.Lookups())
	}
}

// clientCertificateRequired: without the client certificate the TLS
// handshake fails and nothing reaches the bank.
func (s Suite) clientCertificateRequired(t *testing.T) {
	r := s.start(t, 5*time.Second, true)
	if err := s.lookup(r.conn); !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	if r.fake.Tokens() != 0 || r.fake.Requests() != 0 {
		t.Errorf("tokens %d requests %d without a client certificate", r.fake.Tokens(), r.fake.Requests())
	}
}

// Benchmark measures a lookup of the suite's everyday slip.
func (s Suite) Benchmark(b *testing.B) {
	r := s.start(b, 0, false)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.lookup(r.conn); err != nil {
			b.Fatal(err)
		}
	}
}
