package jobs_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/skip2/go-qrcode"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

const (
	hook          = "https://127.0.0.1/hook"
	webhookSecret = "whsec-branch-secret-0001"
)

var (
	verifyRetries   = []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second, 240 * time.Second}
	deliveryRetries = []time.Duration{10 * time.Second, 30 * time.Second, 120 * time.Second}
	retention       = 168 * time.Hour
)

// clock is a settable test clock.
type clock = testnet.Clock

// env is core's async verification over a real store and the sandbox bank.
type env struct {
	t     *testing.T
	clock *clock
	path  string
	st    store.Store
	j     *jobs.Jobs
}

func setup(t *testing.T) *env {
	t.Helper()
	c := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	box, err := secret.New(strings.Repeat("cd", 32))
	if err != nil {
		t.Fatal(err)
	}
	url := func(s string) *string { return &s }
	one := int64(1)
	_, err = st.InsertMissing(store.Records{
		Services: []store.Service{
			{ID: "svc", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1},
			{ID: "svc-other", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1},
			{ID: "svc-expired", State: store.StateExpired, QuotaLimit: 100, CycleAnchorDay: 1},
			{ID: "svc-banned", State: store.StateBanned, QuotaLimit: 100, CycleAnchorDay: 1},
			{ID: "svc-user", State: store.StateActive, UserBanned: true, QuotaLimit: 100, CycleAnchorDay: 1},
		},
		Branches: []store.Branch{
			{ID: "br", ServiceID: "svc", Main: true, Active: true, KeyDigest: store.Digest("k1"),
				WebhookURL: url(hook), WebhookSecret: box.Seal(webhookSecret, "webhook/br")},
			{ID: "br-nohook", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k2")},
			{ID: "br-badhook", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k2b"), WebhookURL: url("https://10.1.2.3/hook")},
			{ID: "br-nosecret", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k3"), WebhookURL: url(hook)},
			{ID: "br-one", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k4"), WebhookURL: url(hook), LimitQuota: &one},
			{ID: "br-other", ServiceID: "svc-other", Main: true, Active: true, KeyDigest: store.Digest("k5"), WebhookURL: url(hook)},
			{ID: "br-expired", ServiceID: "svc-expired", Main: true, Active: true, KeyDigest: store.Digest("k6"), WebhookURL: url(hook)},
			{ID: "br-banned", ServiceID: "svc-banned", Main: true, Active: true, KeyDigest: store.Digest("k7"), WebhookURL: url(hook)},
			{ID: "br-user", ServiceID: "svc-user", Main: true, Active: true, KeyDigest: store.Digest("k8"), WebhookURL: url(hook)},
			{ID: "br-gone", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k9"),
				WebhookURL: url(hook), WebhookSecret: box.Seal(webhookSecret, "webhook/br-gone")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{NotFound: []string{"NOTFOUNDREF1"}}, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(egress.Config{Policy: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})})
	if err != nil {
		t.Fatal(err)
	}
	v := &verify.Verifier{Store: st, Upstream: sb, Images: verify.Images{Egress: eg}, Now: c.Now}
	j := &jobs.Jobs{Store: st, Verifier: v, Box: box, Egress: eg, Now: c.Now, Log: slog.New(slog.DiscardHandler),
		VerifyRetries: verifyRetries, DeliveryRetries: deliveryRetries, Retention: retention}
	e := &env{t: t, clock: c, path: path, st: st, j: j}
	t.Cleanup(func() { e.st.Close() }) // the store open at the end
	return e
}

func payload(ref string) verify.Request {
	return verify.Request{Source: verify.Source{Payload: slip.Bank{BankCode: "004", TransRef: ref}.Encode()}}
}

// submit submits one job for a branch of svc and returns its id.
func (e *env) submit(branch, ref string) string {
	e.t.Helper()
	out, err := e.j.Submit(context.Background(), "svc", branch, []verify.Request{payload(ref)}, "", false)
	if err != nil {
		e.t.Fatalf("submit %s for %s: %v", ref, branch, err)
	}
	return out.JobID
}

// take returns the messages of topic now in the outbox and acks the whole
// outbox, as the publisher would.
func (e *env) take(topic string) []store.Message {
	e.t.Helper()
	msgs, err := e.st.Outbox(10000)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(msgs) > 0 {
		if err := e.st.Ack(msgs[len(msgs)-1].Seq); err != nil {
			e.t.Fatal(err)
		}
	}
	var out []store.Message
	for _, m := range msgs {
		if m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// takeOne is take for exactly one message of topic.
func (e *env) takeOne(topic string) store.Message {
	e.t.Helper()
	msgs := e.take(topic)
	if len(msgs) != 1 {
		e.t.Fatalf("%d %s messages in the outbox, want 1", len(msgs), topic)
	}
	return msgs[0]
}

func (e *env) handle(m store.Message) {
	e.t.Helper()
	if err := e.j.HandleJob(context.Background(), kafka.Message{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value}); err != nil {
		e.t.Fatalf("HandleJob: %v", err)
	}
}

func (e *env) outcome(o api.WebhookOutcome) {
	e.t.Helper()
	raw, _ := json.Marshal(o)
	if err := e.j.HandleOutcome(context.Background(), kafka.Message{Topic: api.TopicWebhookOutcomes, Key: []byte(o.JobID), Value: raw}); err != nil {
		e.t.Fatalf("HandleOutcome: %v", err)
	}
}

func (e *env) job(id string) store.Job {
	e.t.Helper()
	j, err := e.st.Job(id)
	if err != nil {
		e.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

func (e *env) used(service, branch string) int64 {
	e.t.Helper()
	_, all, err := e.st.Counters()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, sc := range all {
		if sc.Service.ID != service {
			continue
		}
		for _, b := range sc.Branches {
			if b.BranchID == branch {
				return b.Counter.Used
			}
		}
		return sc.Counter.Used // a deleted branch: what its service was charged
	}
	e.t.Fatalf("no service %s", service)
	return 0
}

func (e *env) runDue() time.Time {
	e.t.Helper()
	next, err := e.j.RunDue()
	if err != nil {
		e.t.Fatal(err)
	}
	return next
}

func jobMessage(t *testing.T, m store.Message) api.JobMessage {
	t.Helper()
	var jm api.JobMessage
	if err := json.Unmarshal(m.Value, &jm); err != nil {
		t.Fatal(err)
	}
	return jm
}

func callback(t *testing.T, m store.Message) (api.Callback, map[string]any) {
	t.Helper()
	var cb api.Callback
	if err := json.Unmarshal(m.Value, &cb); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(cb.Body), &body); err != nil {
		t.Fatalf("callback body %q: %v", cb.Body, err)
	}
	if m.Key != cb.JobID {
		t.Errorf("slip.results key %q, callback job %q", m.Key, cb.JobID)
	}
	return cb, body
}

func errorCode(err error) string {
	var e *api.Error
	if !errors.As(err, &e) {
		return "not an api error: " + err.Error()
	}
	return e.Code.String()
}

// TestSubmitRefusals: a submit that cannot run is refused with the code a
// client sees, before any job exists.
func TestSubmitRefusals(t *testing.T) {
	e := setup(t)
	// br-one may verify once: use it up with a job.
	e.submit("br-one", "QUOTAREF0001")
	e.handle(e.takeOne(api.TopicJobs))
	if got := e.job(e.takeOne(api.TopicResults).Key).Status; got != jobs.Done {
		t.Fatalf("the job using up br-one's quota is %s", got)
	}
	e.take("")

	f := func(branch, callbackURL string, reqs []verify.Request, batch bool, want, wantText string) {
		t.Helper()
		_, err := e.j.Submit(context.Background(), "svc", branch, reqs, callbackURL, batch)
		if err == nil {
			t.Errorf("%s %q: accepted, want %s", branch, callbackURL, want)
			return
		}
		if got := errorCode(err); got != want {
			t.Errorf("%s %q: %s (%v), want %s", branch, callbackURL, got, err, want)
		}
		if !strings.Contains(err.Error(), wantText) {
			t.Errorf("%s %q: %q does not mention %q", branch, callbackURL, err.Error(), wantText)
		}
	}
	one := []verify.Request{payload("REFUSEDREF01")}
	f("br-nohook", "", one, false, "VALIDATION_ERROR", "callbackUrl")
	f("br", "http://127.0.0.1/hook", one, false, "INVALID_CALLBACK_URL", "")
	f("br-nohook", "http://127.0.0.1/hook", one, false, "INVALID_CALLBACK_URL", "")
	f("br", "https://10.1.2.3/hook", one, false, "INVALID_CALLBACK_URL", "")
	f("br-badhook", "", one, false, "INVALID_CALLBACK_URL", "the branch's webhookUrl") // not the callbackUrl the client did not send
	f("br-one", "", one, false, "QUOTA_EXCEEDED", "")
	bad := verify.Request{Source: verify.Source{URL: "ftp://127.0.0.1/slip.png"}}
	f("br", "", []verify.Request{payload("REFUSEDREF02"), bad}, true, "URL_PROTOCOL_NOT_ALLOWED", "items[1].url")

	if msgs := e.take(api.TopicJobs); len(msgs) != 0 {
		t.Errorf("refused submits queued %d jobs", len(msgs))
	}
}

// TestSubmitDurable: accepted jobs are on disk with their slip.jobs
// messages when Submit returns, in item order, and survive a restart.
func TestSubmitDurable(t *testing.T) {
	e := setup(t)
	out, err := e.j.Submit(context.Background(), "svc", "br",
		[]verify.Request{payload("BATCHREF0001"), payload("BATCHREF0002"), payload("BATCHREF0003")}, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if out.BatchID == nil || *out.BatchID == "" || len(out.JobIDs) != 3 || out.JobID != "" || out.Status != jobs.Queued {
		t.Fatalf("batch submit answered %+v", out)
	}
	single, err := e.j.Submit(context.Background(), "svc", "br-nohook", []verify.Request{payload("SINGLEREF001")}, "https://127.0.0.2/own", false)
	if err != nil {
		t.Fatal(err)
	}
	if single.JobID == "" || single.BatchID != nil || single.JobIDs != nil {
		t.Fatalf("single submit answered %+v", single)
	}

	// Restart: everything accepted is still there.
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(e.path, e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	e.st, e.j.Store, e.j.Verifier.Store = st, st, st
	msgs := e.take(api.TopicJobs)
	want := append(append([]string(nil), out.JobIDs...), single.JobID)
	if len(msgs) != len(want) {
		t.Fatalf("%d slip.jobs messages after restart, want %d", len(msgs), len(want))
	}
	for i, id := range want {
		if jm := jobMessage(t, msgs[i]); jm.JobID != id || jm.Attempt != 1 || msgs[i].Key != id || jm.EventID == "" {
			t.Errorf("message %d: key %s %+v, want job %s attempt 1", i, msgs[i].Key, jm, id)
		}
		j := e.job(id)
		if j.Status != jobs.Queued || j.Attempt != 1 || j.Created != e.clock.Now().UnixMilli() {
			t.Errorf("job %s: %+v", id, j)
		}
		if i < 3 && (j.CallbackURL != hook || j.BatchID != *out.BatchID || j.BranchID != "br") {
			t.Errorf("batch job %s: callback %q batch %q branch %q", id, j.CallbackURL, j.BatchID, j.BranchID)
		}
	}
	if j := e.job(single.JobID); j.CallbackURL != "https://127.0.0.2/own" || j.BatchID != "" {
		t.Errorf("single job: callback %q batch %q", j.CallbackURL, j.BatchID)
	}
	if v, err := e.j.Poll("svc", "br", out.JobIDs[1]); err != nil || v.Status != jobs.Queued || v.BatchID == nil || *v.BatchID != *out.BatchID {
		t.Errorf("poll of a batch job: %+v, %v", v, err)
	}
}

func sign(body string) string {
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestHandleJobSuccess: a verified slip ends the job done with one signed
// callback; a redelivered message for it changes nothing.
func TestHandleJobSuccess(t *testing.T) {
	e := setup(t)
	id := e.submit("br", "SUCCESSREF01")
	msg := e.takeOne(api.TopicJobs)
	e.handle(msg)

	j := e.job(id)
	if j.Status != jobs.Done || j.DueAt != 0 {
		t.Fatalf("job after a verified attempt: status %s due %d", j.Status, j.DueAt)
	}
	cb, body := callback(t, e.takeOne(api.TopicResults))
	if cb.JobID != id || cb.ServiceID != "svc" || cb.Delivery != 1 || cb.URL != hook || cb.EventID == "" {
		t.Errorf("callback %+v", cb)
	}
	if cb.Signature != sign(cb.Body) {
		t.Errorf("signature %q does not verify over the body with the branch's webhook secret", cb.Signature)
	}
	data, _ := body["data"].(map[string]any)
	if body["jobId"] != id || body["status"] != "success" || body["batchId"] != nil || body["error"] != nil ||
		data["isDuplicate"] != false || body["timestamp"] != e.clock.Now().UTC().Format(time.RFC3339Nano) {
		t.Errorf("callback body %s", cb.Body)
	}
	v, err := e.j.Poll("svc", "br", id)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Status string            `json:"status"`
		Data   verify.BankResult `json:"data"`
	}
	if err := json.Unmarshal(v.Result, &res); err != nil || v.Status != jobs.Done || res.Status != "success" ||
		res.Data.IsDuplicate || res.Data.RawSlip.TransRef != "SUCCESSREF01" || v.Error != nil {
		t.Errorf("polled %s %s %s (%v)", v.Status, v.Result, v.Error, err)
	}
	if n := e.used("svc", "br"); n != 1 {
		t.Errorf("quota used %d, want 1", n)
	}

	// The same message again (a redelivery) is skipped.
	e.handle(msg)
	if msgs := e.take(api.TopicResults); len(msgs) != 0 {
		t.Errorf("a redelivered message sent %d more callbacks", len(msgs))
	}
	if n := e.used("svc", "br"); n != 1 {
		t.Errorf("a redelivered message charged quota: used %d", n)
	}
	if j2 := e.job(id); string(j2.Callback) != string(j.Callback) || j2.Status != jobs.Done {
		t.Errorf("a redelivered message changed the job")
	}
	// Messages for unknown jobs or that are not JSON are skipped too.
	e.handle(store.Message{Topic: api.TopicJobs, Value: []byte(`{"jobId":"nope","attempt":1}`)})
	e.handle(store.Message{Topic: api.TopicJobs, Value: []byte(`not json`)})
}

// TestHandleJobKeepsPayload: a job sent as an image keeps only the slip
// payload once its first attempt has read it, and a finished job keeps no
// request at all, so stored jobs hold results, not uploads.
func TestHandleJobKeepsPayload(t *testing.T) {
	e := setup(t)
	want := payload("NOTFOUNDREF1").Source.Payload
	img, err := qrcode.Encode(want, qrcode.Medium, 512)
	if err != nil {
		t.Fatal(err)
	}
	blank, err := qrcode.Encode("not a slip", qrcode.Medium, 512)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(src verify.Source) string {
		t.Helper()
		out, err := e.j.Submit(context.Background(), "svc", "br", []verify.Request{{Source: src}}, "", false)
		if err != nil {
			t.Fatal(err)
		}
		e.handle(e.takeOne(api.TopicJobs))
		return out.JobID
	}

	id := submit(verify.Source{Image: img})
	j := e.job(id)
	var req verify.Request
	if err := json.Unmarshal(j.Request, &req); err != nil || j.Status != jobs.Retrying ||
		req.Source.Payload != want || req.Source.Image != nil || len(j.Request) > 1024 {
		t.Fatalf("waiting job: status %s, request of %d bytes: %+v (%v)", j.Status, len(j.Request), req.Source, err)
	}
	e.clock.Advance(verifyRetries[0])
	e.runDue()
	e.handle(e.takeOne(api.TopicJobs)) // the second attempt runs from the payload
	if j := e.job(id); j.Status != jobs.Retrying || j.Attempt != 3 {
		t.Fatalf("after the second attempt: status %s attempt %d", j.Status, j.Attempt)
	}

	id = submit(verify.Source{Image: blank})
	if j := e.job(id); j.Status != jobs.Failed || j.Request != nil {
		t.Errorf("failed job: status %s error %s, request of %d bytes kept", j.Status, j.Error, len(j.Request))
	}
	id = submit(payload("SUCCESSREF01").Source)
	if j := e.job(id); j.Status != jobs.Done || j.Request != nil {
		t.Errorf("done job: status %s, request of %d bytes kept", j.Status, len(j.Request))
	}
}

// heldBank counts lookups and holds each until released.
type heldBank struct {
	bank.Connector
	lookups          atomic.Int32
	arrived, release chan struct{}
	finish           bool // answer even when the context ended meanwhile
}

func (h *heldBank) Bank(ctx context.Context, code, ref string) (bank.Slip, error) {
	h.lookups.Add(1)
	h.arrived <- struct{}{}
	<-h.release
	if h.finish {
		ctx = context.WithoutCancel(ctx)
	}
	return h.Connector.Bank(ctx, code, ref)
}

// usage returns the usage events now in the outbox, in order, leaving them
// there (take acks the whole outbox).
func (e *env) usage() []api.UsageEvent {
	e.t.Helper()
	msgs, err := e.st.Outbox(10000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []api.UsageEvent
	for _, m := range msgs {
		if m.Topic != api.TopicUsage {
			continue
		}
		var u api.UsageEvent
		if err := json.Unmarshal(m.Value, &u); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// holdBank makes e's bank hold each lookup until released.
func (e *env) holdBank() *heldBank {
	held := &heldBank{Connector: e.j.Verifier.Upstream, arrived: make(chan struct{}, 2), release: make(chan struct{})}
	e.j.Verifier.Upstream = held
	return held
}

// handleIn handles m with ctx in a goroutine; its error arrives on the
// channel.
func (e *env) handleIn(ctx context.Context, m store.Message) chan error {
	done := make(chan error, 1)
	go func() { done <- e.j.HandleJob(ctx, kafka.Message{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value}) }()
	return done
}

// doneOnce checks that job id of br is done, with one callback sent and one
// verification charged.
func (e *env) doneOnce(id string) {
	e.t.Helper()
	if j := e.job(id); j.Status != jobs.Done {
		e.t.Errorf("job %s", j.Status)
	}
	if n := len(e.take(api.TopicResults)); n != 1 {
		e.t.Errorf("%d callbacks, want 1", n)
	}
	if n := e.used("svc", "br"); n != 1 {
		e.t.Errorf("quota used %d, want 1", n)
	}
}

// TestHandleJobConcurrentDuplicate: the same message handled twice at once
// (a resend, two workers) sends one bank lookup, charges once and sends one
// callback.
func TestHandleJobConcurrentDuplicate(t *testing.T) {
	e := setup(t)
	held := e.holdBank()
	id := e.submit("br", "SUCCESSREF02")
	msg := e.takeOne(api.TopicJobs)
	first := e.handleIn(context.Background(), msg)
	<-held.arrived
	second := e.handleIn(context.Background(), msg) // while the first is in hand
	select {
	case err := <-second:
		if err != nil {
			t.Error(err)
		}
	case <-held.arrived:
		t.Error("the second handling sent a lookup too")
		defer func() { <-second }()
	}
	close(held.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := held.lookups.Load(); n != 1 {
		t.Errorf("%d bank lookups for one attempt, want 1", n)
	}
	e.doneOnce(id)
}

// TestHandleJobCutByStop: an attempt whose context ends while it runs (the
// consumer's grace after SIGTERM ran out) records no outcome: the job stays
// processing and the message, handled again after the restart, finishes it
// once, charged once.
func TestHandleJobCutByStop(t *testing.T) {
	e := setup(t)
	held := e.holdBank()
	id := e.submit("br", "SUCCESSREF03")
	msg := e.takeOne(api.TopicJobs)
	ctx, cancel := context.WithCancel(context.Background())
	cut := e.handleIn(ctx, msg)
	<-held.arrived
	cancel() // the grace ran out
	close(held.release)
	if err := <-cut; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cut attempt returned %v, want context.Canceled (not handled, not committed)", err)
	}
	if j := e.job(id); j.Status != jobs.Processing || j.Result != nil || j.Error != nil {
		t.Fatalf("after the cut: status %s result %s error %s, want processing and nothing recorded", j.Status, j.Result, j.Error)
	}
	if u := e.usage(); len(u) != 0 {
		t.Errorf("the cut attempt reported usage %+v", u)
	}
	if n := len(e.take(api.TopicResults)); n != 0 {
		t.Fatalf("the cut attempt sent %d callbacks", n)
	}
	e.handle(msg) // after the restart (the lookup is released)
	if u := e.usage(); len(u) != 1 || u[0].Outcome != "success" || !u[0].Billable {
		t.Errorf("usage after the restart: %+v, want one billable success", u)
	}
	e.doneOnce(id)
}

// TestHandleJobFinishedAtStop: an attempt whose lookup succeeded just as the
// stop's grace ran out is recorded (done, charged and reported once), not
// run again.
func TestHandleJobFinishedAtStop(t *testing.T) {
	e := setup(t)
	held := e.holdBank()
	held.finish = true
	id := e.submit("br", "SUCCESSREF04")
	ctx, cancel := context.WithCancel(context.Background())
	done := e.handleIn(ctx, e.takeOne(api.TopicJobs))
	<-held.arrived
	cancel()
	close(held.release)
	if err := <-done; err != nil {
		t.Fatalf("HandleJob: %v", err)
	}
	if u := e.usage(); len(u) != 1 || u[0].Outcome != "success" || !u[0].Billable {
		t.Errorf("usage: %+v, want one billable success", u)
	}
	e.doneOnce(id)
}

// jsQuote is what JavaScript's JSON.stringify writes for the string that
// JSON.parse reads from Go's encoding of s (ECMAScript's QuoteJSONString):
// a byte of invalid UTF-8 reads as U+FFFD, as range reads it; '"', '\\'
// and the control characters \b, \f, \n, \r, \t are escaped short, the
// other control characters as \u00xx in lower case; everything else,
// "<>&", U+2028 and U+2029 among it, is written as itself. (Lone
// surrogates, which JSON.stringify also escapes, are not in Go strings.)
func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// remarks are client texts a callback echoes back: Thai with the
// characters HTML escaping touches, quotes, backslashes (one before text
// that reads like an escape), line and paragraph separators, control
// characters and invalid UTF-8.
var remarks = []string{
	"order 7",
	`ชำระ <ค่า> & "ทดสอบ"`,
	`C:\ใบเสร็จ\u2028 <b>&amp;</b>`,
	"</script><!-- -->",
	"line\u2028separator\u2029paragraph",
	"tab\tnew line\ncarriage\rback\bfeed\f",
	"\x00\x01\x1f\x7f",
	"bad \xff\xfe bytes, a real \ufffd, ✓ and 😀",
	"",
}

type remarked struct {
	Remark string  `json:"remark"`
	Amount float64 `json:"amountInSlip"`
}

// webhookBody is Body of a payload whose data holds remark, and the bytes
// JSON.stringify(JSON.parse(body)) gives back in JavaScript.
func webhookBody(t testing.TB, remark string) (got, js string) {
	t.Helper()
	batch := "batch-1"
	p := api.WebhookPayload{JobID: "job-1", BatchID: &batch, Status: "failed",
		Data:      remarked{remark, 1000.5},
		Error:     &api.ErrorBody{Code: "VALIDATION_ERROR", Message: remark},
		Timestamp: "2026-11-22T10:00:00Z"}
	body, err := p.Body()
	if err != nil {
		t.Fatal(err)
	}
	return string(body), `{"jobId":"job-1","batchId":"batch-1","status":"failed","data":{"remark":` + jsQuote(remark) +
		`,"amountInSlip":1000.5},"error":{"code":"VALIDATION_ERROR","message":` + jsQuote(remark) + `},"timestamp":"2026-11-22T10:00:00Z"}`
}

// TestWebhookBodyAsJavaScriptWritesIt: a callback body is compact JSON,
// byte for byte what JSON.stringify(JSON.parse(body)) writes, so that a
// receiver that signs the re-serialised body still verifies the signature
// (the dispatcher's TestAsyncEndToEnd checks it against node itself).
func TestWebhookBodyAsJavaScriptWritesIt(t *testing.T) {
	for _, remark := range remarks {
		if got, js := webhookBody(t, remark); got != js {
			t.Errorf("remark %q:\n got %s\nwant %s", remark, got, js)
		}
	}
}

// FuzzWebhookBody: for any remark, Body is what JSON.stringify writes and
// reads back as the remark.
func FuzzWebhookBody(f *testing.F) {
	for _, r := range remarks {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, remark string) {
		got, js := webhookBody(t, remark)
		if got != js {
			t.Errorf("remark %q:\n got %s\nwant %s", remark, got, js)
		}
		var back struct {
			Data struct{ Remark string } `json:"data"`
		}
		// It reads back as sent, but for U+FFFD in place of each byte
		// of invalid UTF-8 (as []rune reads them).
		if err := json.Unmarshal([]byte(got), &back); err != nil || back.Data.Remark != string([]rune(remark)) {
			t.Errorf("remark %q reads back as %q (%v)", remark, back.Data.Remark, err)
		}
	})
}

// TestHandleJobCallbackBody: the callback of a job whose remark has
// characters JSON may escape carries them as JSON.stringify writes them,
// and the signature is over those bytes.
func TestHandleJobCallbackBody(t *testing.T) {
	e := setup(t)
	remark := "ชำระ <ค่า> & \"ทดสอบ\" \\ \u2028"
	req := payload("REMARKREF001")
	req.Remark = remark
	if _, err := e.j.Submit(context.Background(), "svc", "br", []verify.Request{req}, "", false); err != nil {
		t.Fatal(err)
	}
	e.handle(e.takeOne(api.TopicJobs))
	cb, body := callback(t, e.takeOne(api.TopicResults))
	if !strings.Contains(cb.Body, `"remark":`+jsQuote(remark)+`,`) || strings.Contains(cb.Body, `\u`) || strings.HasSuffix(cb.Body, "\n") {
		t.Errorf("callback body %s, want the remark as %s", cb.Body, jsQuote(remark))
	}
	if data, _ := body["data"].(map[string]any); data["remark"] != remark {
		t.Errorf("remark reads back as %q", data["remark"])
	}
	if cb.Signature != sign(cb.Body) {
		t.Errorf("signature %q does not verify over the body sent", cb.Signature)
	}
}

// TestHandleJobNoSecret: a branch without a webhook secret gets unsigned
// callbacks.
func TestHandleJobNoSecret(t *testing.T) {
	e := setup(t)
	e.submit("br-nosecret", "NOSECRETREF1")
	e.handle(e.takeOne(api.TopicJobs))
	if cb, _ := callback(t, e.takeOne(api.TopicResults)); cb.Signature != "" {
		t.Errorf("callback of a branch without a secret signed %q", cb.Signature)
	}
}

// TestHandleJobSecretUnreadable: a branch whose webhook secret cannot be
// opened (sealed under another master key) does not hold up the jobs
// behind its own: the job is done, its result kept for polling, and no
// callback goes out unsigned; the next job runs as usual.
func TestHandleJobSecretUnreadable(t *testing.T) {
	e := setup(t)
	if _, err := e.st.UpdateBranch("svc", "br-nosecret", store.Change{}, func(b *store.Branch, _ store.Usage) error {
		b.WebhookSecret = []byte("sealed under another key")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := e.submit("br-nosecret", "BADSECRETREF")
	e.handle(e.takeOne(api.TopicJobs)) // fails the test if HandleJob errs: the consumer would stop there
	if job := e.job(id); job.Status != jobs.Done || !strings.Contains(string(job.Result), `"success"`) {
		t.Errorf("the job: %s %s", job.Status, job.Result)
	}
	if msgs := e.take(api.TopicResults); len(msgs) != 0 {
		t.Errorf("%d callbacks sent, want none (unsigned)", len(msgs))
	}
	e.submit("br", "AFTERBADREF1")
	e.handle(e.takeOne(api.TopicJobs))
	if cb, _ := callback(t, e.takeOne(api.TopicResults)); cb.Signature == "" {
		t.Error("the next job's callback is unsigned")
	}
}

// TestHandleJobBranchDeleted: a job whose branch was deleted after it was
// accepted fails with BRANCH_INACTIVE, charges nothing and sends no
// callback: the branch's webhook secret went with it, and an unsigned
// callback would teach its receiver to take unsigned ones.
func TestHandleJobBranchDeleted(t *testing.T) {
	e := setup(t)
	id := e.submit("br-gone", "GONEREF00001")
	m := e.takeOne(api.TopicJobs)
	if err := e.st.DeleteBranch("svc", "br-gone", store.Change{}); err != nil {
		t.Fatal(err)
	}
	e.handle(m)
	j := e.job(id)
	var body api.ErrorBody
	if err := json.Unmarshal(j.Error, &body); err != nil || j.Status != jobs.Failed || body.Code != "BRANCH_INACTIVE" {
		t.Fatalf("job %s error %s (%v), want failed BRANCH_INACTIVE", j.Status, j.Error, err)
	}
	if msgs := e.take(api.TopicResults); len(msgs) != 0 {
		t.Fatalf("%d callbacks for a deleted branch's job: %s", len(msgs), msgs[0].Value)
	}
	if n := e.used("svc", "br-gone"); n != 0 {
		t.Errorf("quota used %d", n)
	}
}

// TestHandleJobNotFoundRetries: a slip the bank does not find is tried
// again on the schedule, each attempt sent when it comes due, and after 5
// attempts the job is done as not_found, having charged nothing.
func TestHandleJobNotFoundRetries(t *testing.T) {
	e := setup(t)
	id := e.submit("br", "NOTFOUNDREF1")
	msg := e.takeOne(api.TopicJobs)
	for attempt := 1; attempt <= 4; attempt++ {
		if jm := jobMessage(t, msg); jm.Attempt != attempt || jm.JobID != id {
			t.Fatalf("message %+v, want attempt %d", jm, attempt)
		}
		e.handle(msg)
		j := e.job(id)
		due := e.clock.Now().Add(verifyRetries[attempt-1])
		if j.Status != jobs.Retrying || j.Attempt != attempt+1 || j.DueAt != due.UnixMilli() {
			t.Fatalf("after attempt %d: status %s attempt %d due %v, want retrying, %d, %v",
				attempt, j.Status, j.Attempt, time.UnixMilli(j.DueAt), attempt+1, due)
		}
		if v, _ := e.j.Poll("svc", "br", id); v.Status != jobs.Retrying {
			t.Errorf("polled %s while waiting", v.Status)
		}
		if len(e.take(api.TopicJobs))+len(e.take(api.TopicResults)) != 0 {
			t.Fatalf("after attempt %d: messages sent before the retry is due", attempt)
		}
		// The old message again is stale.
		e.handle(msg)
		if j2 := e.job(id); j2.Status != jobs.Retrying || j2.Attempt != attempt+1 {
			t.Fatalf("a stale message moved the job: %s attempt %d", j2.Status, j2.Attempt)
		}
		// Not due a millisecond early; due on time.
		e.clock.Advance(verifyRetries[attempt-1] - time.Millisecond)
		if next := e.runDue(); !next.Equal(time.UnixMilli(due.UnixMilli())) {
			t.Errorf("RunDue before the retry: next %v, want %v", next, due)
		}
		if n := len(e.take(api.TopicJobs)); n != 0 {
			t.Fatalf("retry %d sent %v early", attempt+1, time.Millisecond)
		}
		e.clock.Advance(time.Millisecond)
		if next := e.runDue(); !next.IsZero() {
			t.Errorf("RunDue with nothing else waiting: next %v", next)
		}
		msg = e.takeOne(api.TopicJobs)
		if j := e.job(id); j.Status != jobs.Queued || j.DueAt != 0 {
			t.Fatalf("retry sent, job %s due %d", j.Status, j.DueAt)
		}
	}
	if jm := jobMessage(t, msg); jm.Attempt != 5 {
		t.Fatalf("last message %+v, want attempt 5", jm)
	}
	e.handle(msg)
	j := e.job(id)
	if j.Status != jobs.Done {
		t.Fatalf("after 5 attempts: %s", j.Status)
	}
	var res struct {
		Status string `json:"status"`
		Data   struct {
			Attempts int    `json:"attempts"`
			Reason   string `json:"reason"`
			Message  string `json:"message"`
		} `json:"data"`
	}
	if err := json.Unmarshal(j.Result, &res); err != nil || res.Status != "not_found" || res.Data.Attempts != 5 ||
		res.Data.Reason != "SLIP_NOT_FOUND" || res.Data.Message == "" {
		t.Errorf("result %s (%v)", j.Result, err)
	}
	cb, body := callback(t, e.takeOne(api.TopicResults))
	if body["status"] != "not_found" || cb.Signature != sign(cb.Body) {
		t.Errorf("not_found callback %s signed %q", cb.Body, cb.Signature)
	}
	if n := e.used("svc", "br"); n != 0 {
		t.Errorf("a slip never found charged %d", n)
	}
}

// TestHandleJobRefusedAtProcessing: a job whose caller may no longer verify
// when its attempt runs fails with the reason, and its callback says so.
func TestHandleJobRefusedAtProcessing(t *testing.T) {
	for _, c := range []struct{ service, branch, code string }{
		{"svc-expired", "br-expired", "SERVICE_EXPIRED"},
		{"svc-banned", "br-banned", "SERVICE_BANNED"},
		{"svc-user", "br-user", "USER_BANNED"},
	} {
		t.Run(c.code, func(t *testing.T) {
			e := setup(t)
			// No API changes a service's state, so the job is created as if
			// submitted before the change.
			req, _ := json.Marshal(payload("REFUSEDREF01"))
			id := "job-" + c.branch
			m, _ := json.Marshal(api.JobMessage{EventID: "ev1", JobID: id, Attempt: 1})
			msg := store.Message{Topic: api.TopicJobs, Key: id, Value: m}
			if err := e.st.CreateJobs([]store.Job{{ID: id, ServiceID: c.service, BranchID: c.branch,
				Created: e.clock.Now().UnixMilli(), Status: jobs.Queued, Request: req, CallbackURL: hook, Attempt: 1}}, []store.Message{msg}, 0, store.Nonce{}); err != nil {
				t.Fatal(err)
			}
			e.take("")
			e.handle(msg)
			j := e.job(id)
			var body api.ErrorBody
			if err := json.Unmarshal(j.Error, &body); err != nil || j.Status != jobs.Failed || body.Code != c.code || body.Message == "" {
				t.Fatalf("job %s error %s (%v), want failed %s", j.Status, j.Error, err, c.code)
			}
			if v, err := e.j.Poll(c.service, c.branch, id); err != nil || v.Status != jobs.Failed || string(v.Error) != string(j.Error) || v.Result != nil {
				t.Errorf("polled %+v, %v", v, err)
			}
			_, cb := callback(t, e.takeOne(api.TopicResults))
			errObj, _ := cb["error"].(map[string]any)
			if cb["status"] != "failed" || errObj["code"] != c.code || cb["data"] != nil {
				t.Errorf("callback body %v", cb)
			}
			if n := e.used(c.service, c.branch); n != 0 {
				t.Errorf("quota used %d", n)
			}
		})
	}
}

// TestHandleJobQuotaRanOut: quota used up between submit and the attempt
// fails the job with QUOTA_EXCEEDED.
func TestHandleJobQuotaRanOut(t *testing.T) {
	e := setup(t)
	first, second := e.submit("br-one", "QUOTAREF0001"), e.submit("br-one", "QUOTAREF0002")
	msgs := e.take(api.TopicJobs)
	e.handle(msgs[0])
	e.handle(msgs[1])
	if j := e.job(first); j.Status != jobs.Done {
		t.Errorf("first job %s", j.Status)
	}
	j := e.job(second)
	var body api.ErrorBody
	if json.Unmarshal(j.Error, &body); j.Status != jobs.Failed || body.Code != "QUOTA_EXCEEDED" {
		t.Errorf("second job %s %s, want failed QUOTA_EXCEEDED", j.Status, j.Error)
	}
	if n := e.used("svc", "br-one"); n != 1 {
		t.Errorf("quota used %d, want 1", n)
	}
}

// TestHandleJobRepeatedAttempt: an attempt run again after a crash that
// came after the quota was consumed but before the job moved on is free
// and still not a duplicate.
func TestHandleJobRepeatedAttempt(t *testing.T) {
	e := setup(t)
	id := e.submit("br", "CRASHREF0001")
	queued := e.job(id)
	msg := e.takeOne(api.TopicJobs)
	e.handle(msg)
	e.take("")
	// The crash: the job is as it was while the attempt ran.
	if _, err := e.st.UpdateJob(id, func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Result, j.Callback, j.Delivery, j.Request = jobs.Processing, nil, nil, 0, queued.Request
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.handle(msg)
	j := e.job(id)
	var res struct {
		Status string            `json:"status"`
		Data   verify.BankResult `json:"data"`
	}
	if err := json.Unmarshal(j.Result, &res); err != nil || j.Status != jobs.Done || res.Status != "success" || res.Data.IsDuplicate {
		t.Errorf("repeated attempt: %s %s (%v), want done, success, isDuplicate false", j.Status, j.Result, err)
	}
	_, body := callback(t, e.takeOne(api.TopicResults))
	if data, _ := body["data"].(map[string]any); data["isDuplicate"] != false {
		t.Errorf("repeated attempt's callback data %v", body["data"])
	}
	if n := e.used("svc", "br"); n != 1 {
		t.Errorf("quota used %d after a repeated attempt, want 1", n)
	}
	// Another job of the branch for the same slip is a duplicate, and free.
	other := e.submit("br", "CRASHREF0001")
	e.handle(e.takeOne(api.TopicJobs))
	if err := json.Unmarshal(e.job(other).Result, &res); err != nil || !res.Data.IsDuplicate {
		t.Errorf("another job for the slip: %s", e.job(other).Result)
	}
	if n := e.used("svc", "br"); n != 1 {
		t.Errorf("quota used %d, want 1", n)
	}
}

// finished returns a job of br that is done with its first callback sent.
func (e *env) finished(ref string) (string, api.Callback) {
	e.t.Helper()
	id := e.submit("br", ref)
	e.handle(e.takeOne(api.TopicJobs))
	cb, _ := callback(e.t, e.takeOne(api.TopicResults))
	return id, cb
}

// TestHandleOutcomeOK: a delivered callback settles the job; later outcomes
// of it change nothing.
func TestHandleOutcomeOK(t *testing.T) {
	e := setup(t)
	id, _ := e.finished("OUTCOMEREF01")
	e.outcome(api.WebhookOutcome{JobID: id, Delivery: 1, At: e.clock.Now(), OK: true, Status: 200})
	j := e.job(id)
	if !j.Settled || j.DueAt != 0 {
		t.Fatalf("after a delivered callback: settled %v due %d", j.Settled, j.DueAt)
	}
	e.outcome(api.WebhookOutcome{JobID: id, Delivery: 1, At: e.clock.Now(), Status: 500})
	if j2 := e.job(id); j2.DueAt != 0 || j2.Outcomes != nil || j2.Delivery != 1 {
		t.Errorf("a failure after success scheduled a redelivery: %+v", j2)
	}
	e.clock.Advance(time.Hour)
	e.runDue()
	if n := len(e.take(api.TopicResults)); n != 0 {
		t.Errorf("%d redeliveries of a delivered callback", n)
	}
	// Outcomes for unknown jobs or that are not JSON are skipped.
	e.outcome(api.WebhookOutcome{JobID: "nope", Delivery: 1})
	if err := e.j.HandleOutcome(context.Background(), kafka.Message{Value: []byte("{")}); err != nil {
		t.Errorf("malformed outcome: %v", err)
	}
}

// TestHandleOutcomeDeferred: a delivery the dispatcher deferred (no free
// slot for its host; nothing was sent) is sent again, the same delivery
// byte for byte, after the first retry's wait, and is no failed attempt:
// the job keeps its whole retry budget and records no failure.
func TestHandleOutcomeDeferred(t *testing.T) {
	e := setup(t)
	id, first := e.finished("OUTCOMEREF09")
	for range 6 { // more deferrals than retries: none of them counts
		e.outcome(api.WebhookOutcome{JobID: id, Delivery: 1, At: e.clock.Now(), Deferred: true, Error: "deferred"})
		j := e.job(id)
		if j.Settled || j.Delivery != 1 || j.Outcomes != nil || j.DueAt != e.clock.Now().Add(deliveryRetries[0]).UnixMilli() {
			t.Fatalf("after a deferral: settled %v delivery %d outcomes %s due %d", j.Settled, j.Delivery, j.Outcomes, j.DueAt)
		}
		e.clock.Advance(deliveryRetries[0])
		e.runDue()
		sent, _ := callback(t, e.takeOne(api.TopicResults))
		if sent.Delivery != 1 || sent.Body != first.Body || sent.Signature != first.Signature || sent.URL != first.URL {
			t.Fatalf("the deferred delivery was sent again as %+v, want %+v", sent, first)
		}
	}
	e.outcome(api.WebhookOutcome{JobID: id, Delivery: 1, At: e.clock.Now(), OK: true, Status: 200})
	if j := e.job(id); !j.Settled || j.Error != nil {
		t.Fatalf("delivered after deferrals: settled %v error %s", j.Settled, j.Error)
	}
}

// TestHandleOutcomeFailures: each failed delivery is sent again after its
// wait, byte for byte; after the last the job keeps its result and gains
// webhook: failed with every delivery.
func TestHandleOutcomeFailures(t *testing.T) {
	e := setup(t)
	id, first := e.finished("OUTCOMEREF02")
	result := e.job(id).Result
	failures := []api.WebhookOutcome{
		{Status: 500}, {Error: "dial tcp: connection refused"}, {Status: 404}, {Error: "timeout"},
	}
	for i, f := range failures {
		delivery := i + 1
		f.JobID, f.Delivery, f.At = id, delivery, e.clock.Now().UTC()
		failures[i] = f
		e.outcome(f)
		j := e.job(id)
		if delivery > len(deliveryRetries) {
			break
		}
		due := e.clock.Now().Add(deliveryRetries[i])
		if j.DueAt != due.UnixMilli() || j.Delivery != delivery+1 || j.Settled {
			t.Fatalf("after failed delivery %d: due %v delivery %d settled %v, want due %v", delivery,
				time.UnixMilli(j.DueAt), j.Delivery, j.Settled, due)
		}
		// The same outcome again, or one of another delivery, is stale.
		e.outcome(f)
		e.outcome(api.WebhookOutcome{JobID: id, Delivery: delivery + 1, At: e.clock.Now(), OK: true})
		if j2 := e.job(id); j2.DueAt != j.DueAt || string(j2.Outcomes) != string(j.Outcomes) || j2.Settled {
			t.Fatalf("a stale outcome changed the job after delivery %d", delivery)
		}
		e.clock.Advance(deliveryRetries[i] - time.Millisecond)
		e.runDue()
		if n := len(e.take(api.TopicResults)); n != 0 {
			t.Fatalf("delivery %d sent early", delivery+1)
		}
		e.clock.Advance(time.Millisecond)
		e.runDue()
		cb, _ := callback(t, e.takeOne(api.TopicResults))
		if cb.Delivery != delivery+1 || cb.Body != first.Body || cb.Signature != first.Signature || cb.URL != first.URL || cb.EventID == first.EventID {
			t.Fatalf("redelivery %d: %+v, want the first callback's body and signature", delivery+1, cb)
		}
	}
	j := e.job(id)
	if !j.Settled || j.DueAt != 0 || j.Status != jobs.Done || string(j.Result) != string(result) {
		t.Fatalf("after the last failure: settled %v due %d status %s result %s", j.Settled, j.DueAt, j.Status, j.Result)
	}
	v, err := e.j.Poll("svc", "br", id)
	if err != nil {
		t.Fatal(err)
	}
	var polled struct {
		Webhook  string `json:"webhook"`
		Delivery []struct {
			Delivery int       `json:"delivery"`
			At       time.Time `json:"at"`
			Status   int       `json:"status"`
			Error    string    `json:"error"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(v.Error, &polled); err != nil || polled.Webhook != "failed" || len(polled.Delivery) != 4 {
		t.Fatalf("polled error %s (%v)", v.Error, err)
	}
	for i, d := range polled.Delivery {
		f := failures[i]
		if d.Delivery != i+1 || !d.At.Equal(f.At) || d.Status != f.Status || d.Error != f.Error {
			t.Errorf("delivery %d reported as %+v, want %+v", i+1, d, f)
		}
	}
	if string(v.Result) != string(result) || v.Status != jobs.Done {
		t.Errorf("polled %s %s after the webhook failed, want the result kept", v.Status, v.Result)
	}
	e.clock.Advance(time.Hour)
	e.runDue()
	if n := len(e.take(api.TopicResults)); n != 0 {
		t.Errorf("%d deliveries after the budget", n)
	}
}

// TestHandleOutcomeFailedJob: a failed job whose callback cannot be
// delivered keeps its error code and message beside webhook: failed.
func TestHandleOutcomeFailedJob(t *testing.T) {
	e := setup(t)
	e.j.DeliveryRetries = nil // one delivery only
	req, _ := json.Marshal(payload("FAILEDREF001"))
	m, _ := json.Marshal(api.JobMessage{JobID: "failing", Attempt: 1})
	msg := store.Message{Topic: api.TopicJobs, Key: "failing", Value: m}
	if err := e.st.CreateJobs([]store.Job{{ID: "failing", ServiceID: "svc-banned", BranchID: "br-banned",
		Created: e.clock.Now().UnixMilli(), Status: jobs.Queued, Request: req, CallbackURL: hook, Attempt: 1}}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	e.handle(msg)
	e.outcome(api.WebhookOutcome{JobID: "failing", Delivery: 1, At: e.clock.Now(), Status: 503})
	v, err := e.j.Poll("svc-banned", "br-banned", "failing")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(v.Error, &obj); err != nil || v.Status != jobs.Failed || obj["code"] != "SERVICE_BANNED" ||
		obj["message"] == "" || obj["message"] == nil || obj["webhook"] != "failed" {
		t.Fatalf("polled %s %s (%v)", v.Status, v.Error, err)
	}
	if ds, _ := obj["delivery"].([]any); len(ds) != 1 {
		t.Errorf("delivery %v, want one failed delivery", obj["delivery"])
	}
}

// TestPoll: a job is visible only to its own branch, and only for its
// retention.
func TestPoll(t *testing.T) {
	e := setup(t)
	id := e.submit("br", "POLLREF00001")
	f := func(service, branch, job string, visible bool) {
		t.Helper()
		v, err := e.j.Poll(service, branch, job)
		switch {
		case visible && (err != nil || v.JobID != job || v.Status != jobs.Queued || v.BatchID != nil):
			t.Errorf("%s/%s polls %s: %+v, %v", service, branch, job, v, err)
		case !visible && errorCode(err) != "JOB_NOT_FOUND":
			t.Errorf("%s/%s polls %s: %+v, %v; want JOB_NOT_FOUND", service, branch, job, v, err)
		}
	}
	f("svc", "br", id, true)
	f("svc", "br-nohook", id, false)
	f("svc-other", "br-other", id, false)
	f("svc-other", "br", id, false)
	f("svc", "br", "no-such-job", false)
	e.clock.Advance(retention - time.Millisecond)
	f("svc", "br", id, true)
	e.clock.Advance(time.Millisecond)
	f("svc", "br", id, false)
}

// TestExpire: jobs past their retention are removed, waiting or not, and
// their retries are never sent; younger jobs stay.
func TestExpire(t *testing.T) {
	e := setup(t)
	old := e.submit("br", "NOTFOUNDREF1")
	e.handle(e.takeOne(api.TopicJobs)) // retrying, due in 30 s
	e.clock.Advance(retention / 2)
	young := e.submit("br", "EXPIREREF001")
	e.take("")
	if n, err := e.j.Expire(); err != nil || n != 0 {
		t.Fatalf("Expire before any retention ran out: %d, %v", n, err)
	}
	e.clock.Advance(retention/2 + time.Millisecond)
	if n, err := e.j.Expire(); err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if _, err := e.st.Job(old); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired job: %v", err)
	}
	e.job(young)
	if next := e.runDue(); !next.IsZero() || len(e.take(api.TopicJobs)) != 0 {
		t.Errorf("an expired job's retry was sent (next %v)", next)
	}
}

// TestOutcomeWithoutDelivery: an outcome that names no delivery, for a job
// that has sent no callback yet, is stale like any other that does not
// match; it must neither change the job nor bring core down. It runs in a
// child process so that a crash of the store's committer fails only this
// test.
func TestOutcomeWithoutDelivery(t *testing.T) {
	if os.Getenv("SLIP_JOBS_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOutcomeWithoutDelivery$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SLIP_JOBS_TEST_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("handling the outcome failed the process: %v\n%s", err, firstLines(string(out), 16))
		}
		return
	}
	e := setup(t)
	for i, ok := range []bool{true, false} {
		id := e.submit("br", "NODELIVERY0"+strconv.Itoa(i))
		e.take("")
		raw, _ := json.Marshal(map[string]any{"jobId": id, "ok": ok})
		if err := e.j.HandleOutcome(context.Background(), kafka.Message{Topic: api.TopicWebhookOutcomes, Value: raw}); err != nil {
			t.Errorf("outcome ok=%v without a delivery: %v", ok, err)
		}
		if j := e.job(id); j.Settled || j.DueAt != 0 || j.Outcomes != nil || j.Status != jobs.Queued {
			t.Errorf("outcome ok=%v without a delivery changed a queued job: settled %v due %d outcomes %s",
				ok, j.Settled, j.DueAt, j.Outcomes)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestHandleJobServiceRefused: a job accepted before its service was
// banned, or before its end date, fails with the spec's code when it runs,
// charging nothing.
func TestHandleJobServiceRefused(t *testing.T) {
	for _, tc := range []struct {
		code   string
		change func(sv *store.Service, now time.Time)
	}{
		{"SERVICE_BANNED", func(sv *store.Service, _ time.Time) { sv.State = store.StateBanned }},
		{"SERVICE_EXPIRED", func(sv *store.Service, now time.Time) { sv.ExpiresAt = &now }},
	} {
		t.Run(tc.code, func(t *testing.T) {
			e := setup(t)
			id := e.submit("br", "REFUSEDREF01")
			m := e.takeOne(api.TopicJobs)
			if _, err := e.st.UpdateService("svc", "service.state", store.Change{}, func(sv *store.Service, _ quota.Counter, now time.Time) error {
				tc.change(sv, now)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e.handle(m)
			j := e.job(id)
			var body api.ErrorBody
			if err := json.Unmarshal(j.Error, &body); err != nil || j.Status != jobs.Failed || body.Code != tc.code {
				t.Fatalf("job %s error %s (%v), want failed %s", j.Status, j.Error, err, tc.code)
			}
			if n := e.used("svc", "br"); n != 0 {
				t.Errorf("quota used %d", n)
			}
		})
	}
}
