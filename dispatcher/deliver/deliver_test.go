package deliver_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/dispatcher/deliver"
)

// tlsReceiver is an HTTPS receiver counting deliveries, and an egress
// client that trusts it on loopback.
func tlsReceiver(tb testing.TB, h http.HandlerFunc) (*httptest.Server, *egress.Client) {
	srv, ca := testnet.TLSServer(tb, h)
	c, err := egress.New(egress.Config{Policy: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), CAFile: ca, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return srv, c
}

// outcomes collects the outcomes the dispatcher writes.
type outcomes struct{ got chan api.WebhookOutcome }

func (o outcomes) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	for _, m := range msgs {
		var out api.WebhookOutcome
		if err := json.Unmarshal(m.Value, &out); err != nil {
			return err
		}
		o.got <- out
	}
	return nil
}

// callback is job n's first delivery to url, of a service of its own.
func callback(url string, n int) kafka.Message { return callbackOf(fmt.Sprint("svc", n), url, n) }

func callbackOf(service, url string, n int) kafka.Message {
	raw, _ := json.Marshal(api.Callback{EventID: fmt.Sprint("ev", n), JobID: fmt.Sprint("job", n), ServiceID: service,
		Delivery: 1, URL: url, Body: `{"jobId":"` + fmt.Sprint("job", n) + `"}`, Signature: "sha256=00"})
	return kafka.Message{Value: raw}
}

// TestOutcomes: a 2xx is success; another status, a redirect, a blocked
// address and a dead port are failures with what happened.
func TestOutcomes(t *testing.T) {
	srv, client := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(api.SignatureHeader) != "sha256=00" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusMovedPermanently)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	o := outcomes{got: make(chan api.WebhookOutcome, 1)}
	d := &deliver.Dispatcher{Egress: client, Outcomes: o, PerHost: 2, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	dead := testnet.FreeAddr(t)
	// A receiver that answers a garbage status line of 60 KB: Go's error
	// quotes it whole.
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testnet.Serve(t, garbage, func(conn net.Conn) {
		tc := tls.Server(conn, srv.TLS)
		bufio.NewReader(tc).ReadString('\n')
		io.WriteString(tc, "HTTP/1.1 "+strings.Repeat("x", 60<<10)+"\r\n\r\n")
	})
	for _, c := range []struct {
		url    string
		ok     bool
		status int
		err    string // what the merchant polling the job reads
	}{
		{srv.URL + "/ok", true, 204, ""},
		{srv.URL + "/fail", false, 500, ""},
		{srv.URL + "/moved", false, 301, ""},
		{"https://10.1.2.3/hook", false, 0, "refused: INVALID_CALLBACK_URL"},
		{"https://" + dead + "/hook", false, 0, "connection refused"},
		{"https://" + garbage.Addr().String() + "/hook", false, 0, "network or protocol error"},
	} {
		if err := d.Handle(context.Background(), callback(c.url, 1)); err != nil {
			t.Fatal(err)
		}
		out := <-o.got
		if out.OK != c.ok || out.Status != c.status || out.Error != c.err || out.JobID != "job1" || out.Delivery != 1 {
			t.Errorf("%s: outcome %+v, want error %q", c.url, out, c.err)
		}
	}
}

// TestSignatureHeader: the signature arrives at a real receiver under the
// header name the deployment set (X-Service-Signature when it set none),
// and under no other; an unsigned callback carries no signature header.
func TestSignatureHeader(t *testing.T) {
	got := make(chan http.Header, 1)
	srv, client := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	o := outcomes{got: make(chan api.WebhookOutcome, 1)}
	f := func(configured string, signature string, want string) {
		t.Helper()
		d := &deliver.Dispatcher{Egress: client, Outcomes: o, PerHost: 1, SignatureHeader: configured, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
		raw, _ := json.Marshal(api.Callback{EventID: "ev1", JobID: "job1", Delivery: 1, URL: srv.URL + "/hook", Body: `{"jobId":"job1"}`, Signature: signature})
		if err := d.Handle(context.Background(), kafka.Message{Value: raw}); err != nil {
			t.Fatal(err)
		}
		if out := <-o.got; !out.OK {
			t.Fatalf("delivery with header %q: %+v", configured, out)
		}
		h := <-got
		var signed []string
		for name, v := range h {
			if strings.HasPrefix(strings.Join(v, ","), "sha256=") {
				signed = append(signed, name)
			}
		}
		switch {
		case want == "" && len(signed) != 0:
			t.Errorf("configured %q: unsigned callback arrived with signature headers %v", configured, signed)
		case want != "" && (len(signed) != 1 || h.Get(want) != signature):
			t.Errorf("configured %q: signature headers %v (%s: %q), want %s only", configured, signed, want, h.Get(want), want)
		}
	}
	f("", "sha256=0a1b", "X-Service-Signature")
	f("X-Webhook-Signature", "sha256=0a1b", "X-Webhook-Signature")
	f("x-hub-signature-256", "sha256=0a1b", "X-Hub-Signature-256") // names are case-insensitive; Go sends the canonical case
	f("X-Webhook-Signature", "", "")
}

// gatePoster holds every delivery to slow.example until released, and
// answers 204 at once for every other host.
type gatePoster struct {
	entered chan string
	release chan struct{}
}

func (g gatePoster) Post(_ context.Context, url string, _ []byte, _ http.Header) (int, error) {
	if strings.Contains(strings.ToLower(url), "slow.example") {
		g.entered <- url
		<-g.release
	}
	return http.StatusNoContent, nil
}

// holding is a dispatcher whose first delivery, svc-a's job1 to
// slow.example, hangs until release.
type holding struct {
	t *testing.T
	d *deliver.Dispatcher
	g gatePoster
	o outcomes
}

func holdOne(t *testing.T, perService, perHost int) *holding {
	h := &holding{t: t, g: gatePoster{entered: make(chan string, 4), release: make(chan struct{})},
		o: outcomes{got: make(chan api.WebhookOutcome, 4)}}
	h.d = &deliver.Dispatcher{Egress: h.g, Outcomes: h.o, PerService: perService, PerHost: perHost,
		SlotWait: 50 * time.Millisecond, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	go h.d.Handle(context.Background(), callbackOf("svc-a", "https://slow.example/a", 1))
	<-h.g.entered
	return h
}

// handle delivers job n of service to url and returns its outcome.
func (h *holding) handle(service, url string, n int) api.WebhookOutcome {
	h.t.Helper()
	if err := h.d.Handle(context.Background(), callbackOf(service, url, n)); err != nil {
		h.t.Fatal(err)
	}
	return <-h.o.got
}

// release lets the held delivery end, which must succeed.
func (h *holding) release() {
	h.t.Helper()
	close(h.g.release)
	if out := <-h.o.got; !out.OK || out.JobID != "job1" {
		h.t.Errorf("the held delivery: %+v", out)
	}
}

// TestBusyHostDefers: a delivery finding its host's slots taken waits at
// most SlotWait and comes back deferred (nothing sent), so callbacks piling
// up for a slow receiver do not hold the dispatcher's workers; another
// host's delivery goes through meanwhile, and another spelling of the busy
// host is the busy host.
func TestBusyHostDefers(t *testing.T) {
	h := holdOne(t, 4, 1) // slow.example's only slot held
	for n, url := range map[int]string{2: "https://slow.example/b", 3: "https://SLOW.example.:443/c", 5: "https://ｓｌｏｗ．example/e"} {
		if out := h.handle(fmt.Sprint("svc", n), url, n); !out.Deferred || out.OK || out.JobID != fmt.Sprint("job", n) || out.Status != 0 {
			t.Errorf("%s while its host is busy: %+v, want deferred", url, out)
		}
	}
	if out := h.handle("svc4", "https://fast.example/d", 4); !out.OK || out.Deferred {
		t.Errorf("another host while slow.example is busy: %+v", out)
	}
	h.release()
}

// TestBusyServiceDefers: a service with PerService deliveries in flight
// gets its next one deferred whatever host it goes to; another service's
// delivery to that host goes through, and the service's slot is free again
// once its delivery ends.
func TestBusyServiceDefers(t *testing.T) {
	h := holdOne(t, 1, 1) // svc-a's only slot held
	if out := h.handle("svc-a", "https://a2.example/hook", 2); !out.Deferred || out.OK || !strings.Contains(out.Error, "service svc-a") {
		t.Errorf("svc-a's second delivery, to another host: %+v, want deferred", out)
	}
	if out := h.handle("svc-b", "https://a2.example/hook", 3); !out.OK || out.Deferred {
		t.Errorf("svc-b's delivery to the host svc-a was refused: %+v", out)
	}
	h.release()
	if out := h.handle("svc-a", "https://a2.example/hook", 4); !out.OK {
		t.Errorf("svc-a after its delivery ended: %+v", out)
	}
}

// TestBusyHostFreesServiceSlot: a delivery deferred because its host is
// busy gives back the service slot it took, so the service's next delivery
// to another host goes through.
func TestBusyHostFreesServiceSlot(t *testing.T) {
	h := holdOne(t, 2, 1) // one of svc-a's two slots, slow.example's only one
	if out := h.handle("svc-a", "https://slow.example/b", 2); !out.Deferred || !strings.Contains(out.Error, "slow.example") {
		t.Errorf("svc-a's delivery to the busy host: %+v, want deferred for the host", out)
	}
	if out := h.handle("svc-a", "https://fast.example/c", 3); !out.OK {
		t.Errorf("svc-a's delivery to another host, its second slot free again: %+v", out)
	}
	h.release()
}

// TestStopWhileWaitingForSlot: a delivery whose wait for a busy host's slot
// is ended by the stop (not by SlotWait) reports nothing, not even
// deferred: its record, left uncommitted, is delivered again after the
// restart, and a deferral would have core send it a second time.
func TestStopWhileWaitingForSlot(t *testing.T) {
	h := holdOne(t, 4, 1) // slow.example's only slot held
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.d.Handle(ctx, callbackOf("svc-b", "https://slow.example/b", 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("Handle of a delivery stopped while waiting for its slot: %v, want context.Canceled", err)
	}
	select {
	case out := <-h.o.got:
		t.Errorf("a delivery stopped while waiting for its slot reported %+v", out)
	default: // Handle writes its outcome before it returns
	}
	h.release()
}

// BenchmarkDeliveries measures webhook deliveries per second through the
// whole dispatcher path: callbacks in slip.results on a real broker, the
// concurrent consumer, HTTPS POSTs to a local receiver, outcomes written
// back to Kafka.
func BenchmarkDeliveries(b *testing.B) {
	var received atomic.Int64
	srv, client := tlsReceiver(b, func(w http.ResponseWriter, r *http.Request) { received.Add(1) })
	addr := testnet.FreeAddr(b)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- broker.Run(ctx, broker.Config{Addr: addr, Partitions: 6, Memory: true}, func([]string) { close(ready) })
	}()
	<-ready
	defer func() { cancel(); <-done }()
	w := stream.NewWriter([]string{addr}, nil)
	defer w.Close()
	msgs := make([]kafka.Message, b.N)
	for i := range msgs {
		msgs[i] = callback(srv.URL+"/ok", i)
		msgs[i].Topic, msgs[i].Key = api.TopicResults, []byte(fmt.Sprint("job", i))
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		b.Fatal(err)
	}
	d := &deliver.Dispatcher{Egress: client, Outcomes: w, PerService: 64, PerHost: 64, Now: time.Now, Log: slog.New(slog.DiscardHandler), Backoff: time.Second}
	r := stream.NewReader([]string{addr}, nil, api.TopicResults, "bench-dispatcher")
	defer r.Close()
	cctx, stop := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() { consumed <- stream.Consume(cctx, r, 256, d.Handle) }()
	for received.Load() < int64(b.N) {
		time.Sleep(time.Millisecond) // polling interval
	}
	el := time.Since(start)
	b.StopTimer()
	stop()
	<-consumed
	b.ReportMetric(float64(b.N)/el.Seconds(), "deliveries/s")
}

// outcomeLog reads slip.webhook.outcomes (one partition) from the start
// until the test ends.
type outcomeLog struct {
	mu  sync.Mutex
	got []api.WebhookOutcome
}

func readOutcomes(t *testing.T, addr string) *outcomeLog {
	t.Helper()
	l := &outcomeLog{}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: api.TopicWebhookOutcomes, Partition: 0, MaxWait: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				return
			}
			var o api.WebhookOutcome
			if err := json.Unmarshal(m.Value, &o); err != nil {
				t.Errorf("outcome %s: %v", m.Value, err)
			}
			l.mu.Lock()
			l.got = append(l.got, o)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; r.Close() })
	return l
}

// of returns the outcomes of job so far.
func (l *outcomeLog) of(job string) []api.WebhookOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []api.WebhookOutcome
	for _, o := range l.got {
		if o.JobID == job {
			out = append(out, o)
		}
	}
	return out
}

// TestShutdownCutDeliveryIsRedelivered: a delivery still waiting for its
// receiver when the dispatcher's grace after SIGTERM runs out reports no
// outcome (core would count an attempt that never completed, and mark the
// job's webhook failed after its last delivery) and leaves its record
// uncommitted, so the restarted dispatcher delivers it again; one that
// finished within the grace is committed, and not delivered again.
func TestShutdownCutDeliveryIsRedelivered(t *testing.T) {
	var hold atomic.Bool
	hold.Store(true)
	entered := make(chan string, 4)
	stopping := make(chan struct{}) // closed when the stop begins
	var mu sync.Mutex
	posts := map[string]int{} // jobId -> deliveries received
	srv, client := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		var p struct{ JobID string }
		json.NewDecoder(r.Body).Decode(&p)
		mu.Lock()
		posts[p.JobID]++
		mu.Unlock()
		switch {
		case r.URL.Path == "/hold" && hold.Load():
			entered <- p.JobID
			<-r.Context().Done() // until the dispatcher gives up
			return
		case r.URL.Path == "/slow" && hold.Load():
			entered <- p.JobID
			<-stopping // answers within the grace
		}
		w.WriteHeader(http.StatusNoContent)
	})
	postsOf := func(job string) int { mu.Lock(); defer mu.Unlock(); return posts[job] }

	addr := broker.StartTest(t, 1)
	w := stream.NewWriter([]string{addr}, nil)
	t.Cleanup(func() { w.Close() })
	var msgs []kafka.Message
	for n, path := range []string{"/ok", "/slow", "/hold"} { // one partition: job1 before job2
		m := callback(srv.URL+path, n)
		m.Topic, m.Key = api.TopicResults, []byte(fmt.Sprint("job", n))
		msgs = append(msgs, m)
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	written := readOutcomes(t, addr)
	d := &deliver.Dispatcher{Egress: client, Outcomes: w, PerService: 4, PerHost: 4, SlotWait: time.Second,
		Now: time.Now, Log: slog.New(slog.DiscardHandler), Backoff: 10 * time.Millisecond}
	// run consumes slip.results as the dispatcher program does, with a
	// grace of 2 s after stop is called.
	run := func() (stop func() error) {
		r := stream.NewReader([]string{addr}, nil, api.TopicResults, "cut-dispatcher")
		ctx, cancel := context.WithCancel(context.Background())
		context.AfterFunc(ctx, func() { close(stopping) })
		done := make(chan error, 1)
		go func() {
			err := stream.ConsumeWithin(ctx, r, 4, 2*time.Second, d.Handle)
			r.Close()
			done <- err
		}()
		var once sync.Once
		var err error
		stop = func() error { once.Do(func() { cancel(); err = <-done }); return err }
		t.Cleanup(func() { stop() })
		return stop
	}

	stop := run()
	for range 2 {
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("job1's and job2's deliveries never reached the receiver")
		}
	}
	testnet.Eventually(t, 30*time.Second, func() bool { return len(written.of("job0")) == 1 },
		func() string { return fmt.Sprintf("job0's outcomes: %+v", written.of("job0")) })
	// SIGTERM: job1's receiver answers within the grace, job2's POST is
	// still waiting when it runs out. (job1 is before job2 in the
	// partition: a commit cannot pass a record still in hand.)
	if err := stop(); err != nil {
		t.Fatalf("the stopped consumer returned %v, want nil (a clean stop)", err)
	}
	// Anything the stop wrote to the partition is on it before a later
	// marker: once the marker is read, a missing outcome is absent.
	raw, _ := json.Marshal(api.WebhookOutcome{JobID: "marker"})
	if err := w.WriteMessages(context.Background(), kafka.Message{Topic: api.TopicWebhookOutcomes, Key: []byte("marker"), Value: raw}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 30*time.Second, func() bool { return len(written.of("marker")) == 1 },
		func() string { return "the marker outcome was not read back" })
	if got := written.of("job2"); len(got) != 0 {
		t.Fatalf("a delivery cut by the shutdown reported outcomes %+v; core would count it as an attempt", got)
	}

	hold.Store(false)
	stopping = make(chan struct{})
	run()
	testnet.Eventually(t, 30*time.Second, func() bool { return len(written.of("job2")) > 0 },
		func() string { return "the restarted dispatcher did not deliver job2 again" })
	if got := written.of("job2"); len(got) != 1 || !got[0].OK || got[0].Delivery != 1 {
		t.Errorf("job2's outcomes after the restart: %+v, want one success of delivery 1", got)
	}
	if n := postsOf("job2"); n != 2 {
		t.Errorf("job2 reached the receiver %d times, want 2 (cut, then delivered)", n)
	}
	if got := written.of("job1"); len(got) != 1 || !got[0].OK || postsOf("job1") != 1 {
		t.Errorf("job1, answered within the grace: outcomes %+v, %d posts, want one of each", got, postsOf("job1"))
	}
}
