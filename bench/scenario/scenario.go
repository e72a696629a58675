// Package scenario holds the bench's named request mixes: what one request
// of a scenario sends and how its answer counts. Every scenario drives the
// public API through the edge as a client does, spreading requests over the
// seed's branches round robin so rate limits and caches see many keys, and
// uses a fresh slip per request unless it is about duplicates.
package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/tenant"
	"github.com/slipverify/slipverify/bench/webhook"
	"github.com/slipverify/slipverify/edge/authn"
)

// Env is what scenarios need to build their requests.
type Env struct {
	Client *Client
	Seed   *tenant.Seed
	// Run is the run's id (RunID), part of every generated slip reference.
	Run string
	// Mix is the scenario file of the mixed scenario.
	Mix string
	// Webhook receives the async scenarios' callbacks (nil: those
	// scenarios cannot run).
	Webhook *webhook.Receiver
	// BatchSize is the number of slips of one async batch (default 20).
	BatchSize int
}

// Scenario is a named way to load the API.
type Scenario struct {
	Name  string
	About string
	// Async scenarios measure submit→callback latency too and need a
	// webhook receiver.
	Async bool
	// Units is how many verifications one request carries (a batch carries
	// many); 1 when unset.
	Units func(env *Env) int
	// Kind is what its requests ask core to read: KindImage (a picture
	// to scan) or KindPayload (the QR payload itself) when unset. A mix
	// reports its kinds apart, and the capacity model plans them apart.
	Kind  string
	build func(ctx context.Context, env *Env) (load.Func, error)
}

// Build returns the scenario's request function for env. Work a scenario
// does ahead of its requests, outside the time they are measured for
// (bank-image's pictures), runs in goroutines that end when ctx ends:
// pass a context that ends with the run.
func (s *Scenario) Build(ctx context.Context, env *Env) (load.Func, error) {
	if env.Client == nil || env.Seed == nil || env.Run == "" {
		return nil, errors.New("scenario: the environment needs a client, a seed and a run id")
	}
	if s.Async && env.Webhook == nil {
		return nil, fmt.Errorf("scenario %s: needs a webhook receiver", s.Name)
	}
	return s.build(ctx, env)
}

// VerificationsPer returns how many verifications one request of s carries.
func (s *Scenario) VerificationsPer(env *Env) int {
	if s.Units == nil {
		return 1
	}
	return s.Units(env)
}

// all is filled by init: mixed looks scenarios up in it.
var all []*Scenario

func init() {
	all = []*Scenario{
		{Name: "bank-v2", About: "v2 bank verify by QR payload, Bearer key, a new slip each request", build: bankV2},
		{Name: "bank-v2-signed", About: "v2 bank verify by QR payload, HMAC-signed request (fresh nonce and timestamp)", build: bankV2Signed},
		{Name: "bank-v1", About: "v1 bank verify (POST /verify, JSON payload, checkDuplicate)", build: bankV1},
		{Name: "bank-image", About: "v2 bank verify by image upload (multipart), slip pictures of phone sizes, a new slip each request", Kind: KindImage, build: bankImage},
		{Name: "wallet-v2", About: "v2 wallet verify by QR payload", build: walletV2},
		{Name: "duplicates", About: "v2 bank verify where 9 requests in 10 draw one of 50 slips of the branch's own pool and the 10th is new; a slot's first draw is new too, so fewer than 90 % repeat: the answers that say isDuplicate are counted (200 duplicate)", build: duplicates},
		{Name: "overload", About: "v2 bank verify on the overload service, beyond what the stack sustains: the adaptive limit sheds load (429, Retry-After, X-RateLimit-Limit dropping)", build: overload},
		{Name: "history", About: "a branch's newest 100 verifications (GET /v2/verifications?limit=100), Bearer key: a read to run beside verification load", build: history},
		{Name: "mixed", About: "a production-like mix of the sync scenarios, weights from a scenario file", build: mixed},
		{Name: "async-single", About: "async bank verify, one slip per submit; callbacks to an HTTPS receiver (submit→callback latency)", Async: true, build: asyncSingle},
		{Name: "async-batch", About: "async batch submit of BatchSize slips; one callback per slip", Async: true, build: asyncBatch,
			Units: func(env *Env) int { return batchSize(env) }},
	}
}

// The kinds of verification: core's cost of one differs by far (a picture
// costs a scan, tens of times a payload's whole verification).
const (
	KindPayload = "payload"
	KindImage   = "image"
)

// KindOf returns the kind of the scenario called name (KindPayload for
// names it does not know: the mix's parts are checked by ReadMix).
func KindOf(name string) string {
	if s, err := Get(name); err == nil && s.Kind != "" {
		return s.Kind
	}
	return KindPayload
}

// All returns every scenario.
func All() []*Scenario { return all }

// Get returns the scenario called name, or an error listing the names.
func Get(name string) (*Scenario, error) {
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown scenario %q; known: %s", name, strings.Join(Names(), ", "))
}

// Names returns the scenario names.
func Names() []string {
	var out []string
	for _, s := range all {
		out = append(out, s.Name)
	}
	return out
}

// bearers returns "Bearer <key>" of each branch, built once.
func bearers(bs []tenant.Branch) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = []byte("Bearer " + b.Key)
	}
	return out
}

func benchBranches(env *Env, service string) ([]tenant.Branch, error) {
	bs := env.Seed.Of(service)
	if len(bs) == 0 {
		if service == "" {
			return nil, errors.New("the seed has no branch to load")
		}
		return nil, fmt.Errorf("the seed has no branch of service %s (use the bench seed)", service)
	}
	return bs, nil
}

// bearerJSON returns a Func that POSTs body(seq) as JSON to path with the
// Bearer key of branch seq mod len(bs); check, when set, returns the
// answer's check for a request and its branch (see Client.do).
func bearerJSON(env *Env, bs []tenant.Branch, path string, body func(dst []byte, seq uint64) []byte,
	check func(r load.Request, b *tenant.Branch) func(Answer) string) load.Func {
	auth := bearers(bs)
	c := env.Client
	return func(ctx context.Context, r load.Request) load.Outcome {
		i := r.Seq % uint64(len(bs))
		req := c.newRequest("POST", path)
		req.Header.SetBytesV("Authorization", auth[i])
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body(req.Body()[:0], r.Seq))
		var read func(Answer) string
		if check != nil {
			read = check(r, &bs[i])
		}
		return c.do(ctx, req, read)
	}
}

// payloadPost returns a Func that POSTs {"payload": payload(seq)} to path
// with a Bearer key of bs.
func payloadPost(env *Env, bs []tenant.Branch, path string, payload func(seq uint64) string) load.Func {
	return bearerJSON(env, bs, path, func(dst []byte, seq uint64) []byte { return appendPayloadBody(dst, payload(seq)) }, nil)
}

func bankV2(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	return payloadPost(env, bs, "/v2/verify/bank", func(seq uint64) string { return bankPayload(env.Run, 'B', seq) }), nil
}

func history(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	auth := bearers(bs)
	c := env.Client
	return func(ctx context.Context, r load.Request) load.Outcome {
		req := c.newRequest("GET", "/v2/verifications?limit=100")
		req.Header.SetBytesV("Authorization", auth[r.Seq%uint64(len(bs))])
		return c.do(ctx, req, nil)
	}, nil
}

func walletV2(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	return payloadPost(env, bs, "/v2/verify/wallet", func(seq uint64) string { return walletPayload(env.Run, seq) }), nil
}

func overload(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, tenant.OverloadService)
	if err != nil {
		return nil, err
	}
	return payloadPost(env, bs, "/v2/verify/bank", func(seq uint64) string { return bankPayload(env.Run, 'O', seq) }), nil
}

// duplicates sends 1 request in 10 with a new slip and 9 with one of 50
// slips of the branch's own pool, so after warm-up most requests take the
// read-only self-duplicate path. The first draw of each slot is a new slip
// as well, so the share of repeats is below 90 % and grows with the run's
// length: the run counts the answers that say isDuplicate ("200
// duplicate") rather than assume it.
func duplicates(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	const pool = 50
	nb := uint64(len(bs))
	return payloadPost(env, bs, "/v2/verify/bank", func(seq uint64) string {
		round := seq / nb // the branch's own request count
		if round%10 == 0 {
			return bankPayload(env.Run, 'N', seq)
		}
		// Pool entry k of branch b: the same slip every time this branch
		// draws k.
		k := mix64(round) % pool
		return bankPayload(env.Run, 'D', (seq%nb)*pool+k)
	}), nil
}

// mix64 is splitmix64's finaliser: a cheap, well-spread hash of n.
func mix64(n uint64) uint64 {
	n ^= n >> 30
	n *= 0xbf58476d1ce4e5b9
	n ^= n >> 27
	n *= 0x94d049bb133111eb
	return n ^ n>>31
}

func bankV1(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	return bearerJSON(env, bs, "/verify", func(dst []byte, seq uint64) []byte {
		dst = append(dst, `{"checkDuplicate":true,"payload":"`...)
		dst = append(dst, bankPayload(env.Run, 'V', seq)...)
		return append(dst, `"}`...)
	}, nil), nil
}

// signers holds one signer per service secret.
func signers(bs []tenant.Branch) ([]*authn.Signer, error) {
	bySecret := map[string]*authn.Signer{}
	out := make([]*authn.Signer, len(bs))
	for i, b := range bs {
		if b.Secret == "" {
			return nil, fmt.Errorf("branch %s: its service has no B2B client to sign with", b.ID)
		}
		if bySecret[b.Secret] == nil {
			bySecret[b.Secret] = authn.NewSigner(b.Secret)
		}
		out[i] = bySecret[b.Secret]
	}
	return out, nil
}

func bankV2Signed(_ context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	sg, err := signers(bs)
	if err != nil {
		return nil, err
	}
	c := env.Client
	method, path := []byte("POST"), authn.SignedPath([]byte("/v2/verify/bank"))
	return func(ctx context.Context, r load.Request) load.Outcome {
		i := r.Seq % uint64(len(bs))
		req := c.newRequest("POST", "/v2/verify/bank")
		body := appendPayloadBody(req.Body()[:0], bankPayload(env.Run, 'S', r.Seq))
		var tsBuf [20]byte
		ts := strconv.AppendInt(tsBuf[:0], time.Now().Unix(), 10)
		nonce := newNonce()
		var sts [256]byte
		sig := sg[i].Sign(authn.AppendStringToSign(sts[:0], method, path, ts, nonce[:], body))
		req.Header.Set("X-API-Key", bs[i].Key)
		req.Header.SetBytesV("X-Timestamp", ts)
		req.Header.SetBytesV("X-Nonce", nonce[:])
		req.Header.Set("X-Signature", sig)
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
		return c.do(ctx, req, nil)
	}, nil
}

// newNonce returns a random UUID v4 in its text form.
func newNonce() [36]byte {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], u[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], u[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], u[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], u[8:10])
	out[23] = '-'
	hex.Encode(out[24:], u[10:])
	return out
}

// bankImage uploads a picture of a new slip each request, in the size
// classes in turn, so every upload takes the path of a new slip: a bank
// lookup and a quota write, never the duplicate path. The pictures are
// made ahead by makePictures (1 to 4 ms each, as long as a fast answer),
// so a request's latency holds none of that work.
func bankImage(ctx context.Context, env *Env) (load.Func, error) {
	bs, err := benchBranches(env, "")
	if err != nil {
		return nil, err
	}
	pics, err := SlipPictures()
	if err != nil {
		return nil, err
	}
	return imageUploads(env, bs, makePictures(ctx, pics, env.Run, pictureMakers(), pictureDepth)), nil
}

// pictureDepth is how many pictures wait made: enough for a burst of
// requests between two of a maker's pictures, few enough (2.6 MiB at
// most) to make at once at the start.
const pictureDepth = 8

// pictureMakers is how many goroutines make pictures: a few, as the
// generator shares the machine with the stack. Against the stack a
// picture is answered in tens of milliseconds, so one maker would keep up.
func pictureMakers() int { return min(runtime.GOMAXPROCS(0), 4) }

// picture is one upload body made ahead of the request that sends it.
type picture struct {
	body        []byte
	contentType string
	err         error
}

// pictureQueue holds pictures of new slips made ahead of the requests
// that upload them. A request takes one from ready and gives it back to
// free once its body is sent, for a maker to reuse.
type pictureQueue struct {
	ready chan *picture
	free  sync.Pool     // *picture
	done  chan struct{} // closed once every maker has stopped
}

// makePictures starts makers goroutines that make pictures of new slips of
// run into a queue of depth, until ctx ends. Maker k of n makes slips k,
// k+n, k+2n, ... (kind 'I'), so no two pictures of a run share a slip, and
// goes through the size classes in turn.
func makePictures(ctx context.Context, pics *Pictures, run string, makers, depth int) *pictureQueue {
	q := &pictureQueue{ready: make(chan *picture, depth), done: make(chan struct{})}
	var wg sync.WaitGroup
	for k := range makers {
		wg.Go(func() {
			for n := uint64(0); ctx.Err() == nil; n++ {
				p, _ := q.free.Get().(*picture)
				if p == nil {
					p = new(picture)
				}
				p.body, p.contentType, p.err = pics.Append(p.body[:0], int(n%uint64(pics.Classes())), bankPayload(run, 'I', n*uint64(makers)+uint64(k)))
				select {
				case q.ready <- p:
				case <-ctx.Done():
				}
			}
		})
	}
	go func() { wg.Wait(); close(q.done) }()
	return q
}

// take returns the next picture made, and how long it waited for one (0
// when one was ready: the fast path); nil when ctx ended first or the
// makers stopped.
func (q *pictureQueue) take(ctx context.Context) (*picture, time.Duration) {
	select {
	case p := <-q.ready:
		return p, 0
	default:
	}
	t0 := time.Now()
	select {
	case p := <-q.ready:
		return p, time.Since(t0)
	case <-ctx.Done():
	case <-q.done:
		select {
		case p := <-q.ready:
			return p, time.Since(t0)
		default:
		}
	}
	return nil, time.Since(t0)
}

// imageUploads returns a Func that uploads the pictures of q with the
// Bearer keys of bs. A wait for a picture not made yet is the generator's
// own (Outcome.Prep), not the stack's.
func imageUploads(env *Env, bs []tenant.Branch, q *pictureQueue) load.Func {
	auth := bearers(bs)
	c := env.Client
	return func(ctx context.Context, r load.Request) load.Outcome {
		p, wait := q.take(ctx)
		if p == nil {
			return load.Outcome{Code: "no picture made", Prep: wait}
		}
		defer q.free.Put(p)
		if p.err != nil {
			return load.Outcome{Code: "picture not made", Prep: wait}
		}
		req := c.newRequest("POST", "/v2/verify/bank")
		req.Header.SetBytesV("Authorization", auth[r.Seq%uint64(len(auth))])
		req.Header.SetContentType(p.contentType)
		req.SetBodyRaw(p.body) // do releases req before it returns, so the body is free again after it
		o := c.do(ctx, req, nil)
		o.Prep = wait
		return o
	}
}

// MixFile is a mixed scenario file: the weight of each scenario, in any
// units (they are normalised).
type MixFile struct {
	Name    string         `json:"name"`
	About   string         `json:"about,omitempty"`
	Weights map[string]int `json:"weights"`
}

// ReadMix reads and checks a scenario file: weights of sync scenarios only,
// not negative, not all zero.
func ReadMix(path string) (MixFile, error) {
	var m MixFile
	raw, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("scenario file: %w", err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("scenario file %s: %w", path, err)
	}
	var errs []error
	total := 0
	for name, w := range m.Weights {
		s, err := Get(name)
		switch {
		case err != nil:
			errs = append(errs, err)
		case s.Async || s.Name == "mixed" || s.Name == "overload":
			errs = append(errs, fmt.Errorf("scenario %s cannot be part of a mix", name))
		case w < 0:
			errs = append(errs, fmt.Errorf("scenario %s: weight %d is negative", name, w))
		}
		total += w
	}
	if total <= 0 {
		errs = append(errs, errors.New("the weights add up to nothing"))
	}
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("scenario file %s: %w", path, err)
	}
	return m, nil
}

// mixed sends each request as one of the file's scenarios, chosen by a hash
// of its sequence number in proportion to the weights; its outcome names
// that scenario (load.Outcome.Part), so the run records each part apart
// and the report its kinds (pictures, payloads) apart. Every part sees the
// run's sequence numbers and marks its slips with a letter of its own, so
// their slips stay distinct; a part's share of them is sparse, so what it
// counts per branch grows more slowly than in a run of its own (in a short
// mix, duplicates' pools are mostly drawn for the first time: bench.txt
// counts the answers that were duplicates).
func mixed(ctx context.Context, env *Env) (load.Func, error) {
	if env.Mix == "" {
		return nil, errors.New("scenario mixed: needs a scenario file (-mix)")
	}
	m, err := ReadMix(env.Mix)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m.Weights))
	for n := range m.Weights {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []load.Func
	var used []string // the scenario of each part
	var cum []uint64
	var total uint64
	for _, n := range names {
		if m.Weights[n] == 0 {
			continue
		}
		s, _ := Get(n)
		f, err := s.Build(ctx, env)
		if err != nil {
			return nil, err
		}
		total += uint64(m.Weights[n])
		parts, cum, used = append(parts, f), append(cum, total), append(used, n)
	}
	return func(ctx context.Context, r load.Request) load.Outcome {
		x := mix64(r.Seq) % total
		i, _ := slices.BinarySearchFunc(cum, x, func(c, x uint64) int {
			if c <= x {
				return -1
			}
			return 1
		})
		o := parts[i](ctx, r)
		o.Part = used[i]
		return o
	}, nil
}
