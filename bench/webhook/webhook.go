// Package webhook is the bench's callback receiver: an HTTPS listener on
// loopback with a certificate from its own CA (core trusts it through
// SLIP_EGRESS_CA_FILE), which checks each callback's X-Service-Signature and
// measures the time from an async submit's due time to its callback.
package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/slipverify/slipverify/bench/hist"
)

// Receiver collects callbacks.
type Receiver struct {
	// URL is the callback URL to give the API.
	URL string
	// CAFile is the PEM file of the CA that signed the receiver's
	// certificate.
	CAFile string
	srv    *http.Server
	// lat is the time from each job's due submit time to its first
	// callback.
	lat *hist.Histogram
	mu  sync.Mutex
	// jobs holds every job expected or seen, by job id.
	jobs  map[string]*job
	stats Stats
}

type job struct {
	due     time.Time
	secret  string
	expect  bool
	arrived time.Time // zero until the first callback
	status  string    // of the first callback
	body    []byte    // a callback seen before its job was expected
	sig     string
}

// Stats counts what arrived.
type Stats struct {
	Expected  uint64 `json:"expected"`
	Delivered uint64 `json:"delivered"` // first callbacks of expected jobs
	// Succeeded counts the first callbacks of expected jobs whose status
	// is success and whose signature is valid: the async verifications
	// completed (a receiver refuses a callback it cannot verify). A not_found callback
	// (the job's whole retry budget passed without the bank finding the
	// slip) ends a job but verifies nothing; the bench's sandbox bank finds
	// every slip it is sent, so there it is a failure, as a sync 404
	// SLIP_NOT_FOUND is. Failed callbacks ("failed CODE") are failures.
	Succeeded uint64 `json:"succeeded"`
	// LastSuccess is when the last successful callback arrived (zero:
	// none), the end of the span over which async throughput is counted.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	Repeats     uint64    `json:"repeats"` // further callbacks of a job (at-least-once)
	Unknown     uint64    `json:"unknown"` // callbacks of jobs never expected
	BadSig      uint64    `json:"badSignature"`
	Malformed   uint64    `json:"malformed"`
	// Status counts the first callbacks of expected jobs by status
	// ("success", "not_found", "failed CODE"); they add up to Delivered.
	Status map[string]uint64 `json:"status"`
}

// CA file names in a receiver's directory.
const (
	CAFile    = "webhook-ca.pem"
	CAKeyFile = "webhook-ca-key.pem"
)

// MakeCA makes the receivers' CA in dir (CAFile and CAKeyFile; dir is
// created when missing) unless a readable one is there already, and
// returns the CA file's path and whether it was made now. A stack must be
// started with SLIP_EGRESS_CA_FILE set to that file before any receiver
// runs (core refuses to start without it), so the CA is made first, once,
// and every later receiver started from dir is signed by it.
func MakeCA(dir string) (caFile string, made bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("webhook: %w", err)
	}
	caFile = filepath.Join(dir, CAFile)
	if _, _, made, err = loadOrMakeCA(caFile, filepath.Join(dir, CAKeyFile)); err != nil {
		return "", false, fmt.Errorf("webhook: %w", err)
	}
	return caFile, made, nil
}

// CheckCA reports an error unless dir holds a receiver CA (CAFile and its
// key) that loads; the error wraps os.ErrNotExist when a file is missing.
func CheckCA(dir string) error {
	if _, _, err := loadCA(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// Start listens on a free loopback port with a certificate signed by the
// CA kept in dir (CAFile and CAKeyFile), made there when missing: a stack
// started with SLIP_EGRESS_CA_FILE=dir/webhook-ca.pem trusts every
// receiver started from dir.
func Start(dir string) (*Receiver, error) {
	caFile := filepath.Join(dir, CAFile)
	cert, err := leafFromCA(caFile, filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "https://" + ln.Addr().String() + "/hook", CAFile: caFile, jobs: map[string]*job{}, stats: Stats{Status: map[string]uint64{}}, lat: new(hist.Histogram)}
	r.srv = &http.Server{Handler: r, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.ServeTLS(ln, "", "")
	return r, nil
}

// Close stops the listener.
func (r *Receiver) Close() error { return r.srv.Close() }

// callback is the part of a callback body the receiver reads.
type callback struct {
	JobID  string `json:"jobId"`
	Status string `json:"status"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// ServeHTTP takes one callback: 200 for a well-formed one, whatever its
// signature (a refusal would only make the dispatcher retry), after
// counting it.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var cb callback
	if err != nil || json.Unmarshal(body, &cb) != nil || cb.JobID == "" {
		r.mu.Lock()
		r.stats.Malformed++
		r.mu.Unlock()
		http.Error(w, "malformed callback", http.StatusBadRequest)
		return
	}
	status := cb.Status
	if cb.Error != nil && cb.Error.Code != "" {
		status += " " + cb.Error.Code
	}
	sig := req.Header.Get("X-Service-Signature")
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[cb.JobID]
	switch {
	case j == nil:
		// Arrived before the submit's answer was read: kept until Expect.
		r.jobs[cb.JobID] = &job{arrived: now, status: status, body: body, sig: sig}
	case !j.arrived.IsZero():
		r.stats.Repeats++
	default:
		j.arrived, j.status = now, status
		r.deliver(j, body, sig)
	}
	w.WriteHeader(http.StatusOK)
}

// deliver counts the first callback of an expected job; r.mu is held.
func (r *Receiver) deliver(j *job, body []byte, sig string) {
	r.stats.Delivered++
	r.stats.Status[j.status]++
	valid := Valid(j.secret, body, sig)
	if !valid {
		r.stats.BadSig++
	}
	if j.status == "success" && valid {
		r.stats.Succeeded++
		if j.arrived.After(r.stats.LastSuccess) {
			r.stats.LastSuccess = j.arrived
		}
	}
	r.lat.Record(j.arrived.Sub(j.due))
}

// Expect registers a submitted job: due is when its submit was due, secret
// the branch's webhook secret that must sign its callback. A job id
// expected before is counted once: it has one callback to wait for, so
// counting it again would report a callback missing.
func (r *Receiver) Expect(jobID string, due time.Time, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[jobID]
	if j != nil && j.expect {
		return
	}
	r.stats.Expected++
	if j == nil {
		r.jobs[jobID] = &job{due: due, secret: secret, expect: true}
		return
	}
	j.due, j.secret, j.expect = due, secret, true
	r.deliver(j, j.body, j.sig)
	j.body = nil
}

// Latency returns the submit→callback latencies since the last Reset.
func (r *Receiver) Latency() *hist.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lat
}

// Reset forgets every job, count and latency: the start of a new run.
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs, r.stats, r.lat = map[string]*job{}, Stats{Status: map[string]uint64{}}, new(hist.Histogram)
}

// Pending returns how many expected jobs have had no callback yet.
func (r *Receiver) Pending() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.Expected - r.stats.Delivered
}

// Stats returns the counts so far, unknown callbacks included.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Status = map[string]uint64{}
	for k, v := range r.stats.Status {
		s.Status[k] = v
	}
	for _, j := range r.jobs {
		if !j.expect {
			s.Unknown++
		}
	}
	return s
}

// Wait polls until every expected job had its callback or the deadline
// passes, and reports whether all arrived.
func (r *Receiver) Wait(deadline time.Time) bool {
	for r.Pending() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for a known time
	}
	return true
}

// Valid reports whether sig ("sha256=<hex>") is the HMAC-SHA256 of body
// keyed with secret, compared in constant time.
func Valid(secret string, body []byte, sig string) bool {
	const prefix = "sha256="
	if len(sig) != len(prefix)+2*sha256.Size || sig[:len(prefix)] != prefix {
		return false
	}
	got, err := hex.DecodeString(sig[len(prefix):])
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// loadOrMakeCA loads the CA of caFile and keyFile, or makes and saves one
// when caFile is missing. A CA file without its key is an error, not
// replaced: a stack may trust it already.
func loadOrMakeCA(caFile, keyFile string) (ca *x509.Certificate, key *ecdsa.PrivateKey, made bool, err error) {
	if _, err := os.Stat(caFile); errors.Is(err, os.ErrNotExist) {
		ca, key, err = makeCA(caFile, keyFile)
		return ca, key, err == nil, err
	}
	ca, key, err = loadCA(caFile, keyFile)
	return ca, key, false, err
}

// leafFromCA loads the CA of caFile and keyFile, making and saving it when
// caFile is missing, and returns a fresh server certificate for 127.0.0.1
// signed by it.
func leafFromCA(caFile, keyFile string) (tls.Certificate, error) {
	ca, caKey, _, err := loadOrMakeCA(caFile, keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func loadCA(caFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", caFile, keyFile)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", caFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	return ca, key, nil
}

func makeCA(caFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "slipverify bench webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}
