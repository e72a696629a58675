// Package jobs runs async verification (spec 4.2, 3 and 6): it accepts
// jobs durably, runs their attempts from slip.jobs with the shared retry
// budget, publishes each result once to slip.results for the dispatcher,
// follows the dispatcher's delivery outcomes (scheduling redeliveries and
// marking exhausted ones), and removes jobs after their retention.
//
// Every change of a job and the Kafka message it causes are written in one
// store transaction (the outbox), so a crash at any point loses nothing and
// a redelivered message finds the job already moved on and is skipped.
// Quota is consumed at most once per job: a repeated attempt finds its slip
// recorded by the job itself and is free.
package jobs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// Job states (ARCHITECTURE.md).
const (
	Queued     = "queued"
	Processing = "processing"
	Retrying   = "retrying"
	Done       = "done"
	Failed     = "failed"
)

// MaxBatch is the most items one batch submit takes.
const MaxBatch = 100

// Jobs runs async verification. Its fields are set once, before use.
type Jobs struct {
	Store    store.Store
	Verifier *verify.Verifier
	Box      *secret.Box    // opens branches' webhook secrets
	Egress   *egress.Client // checks callback and image URLs at submit
	Now      func() time.Time
	Log      *slog.Logger

	VerifyRetries   []time.Duration // waits before attempts 2, 3, ...
	DeliveryRetries []time.Duration // waits before deliveries 2, 3, ...
	Retention       time.Duration   // how long a job can be polled
	MaxOpen         int             // unfinished jobs a branch may have (0: no bound)

	wakeOnce sync.Once
	wake     chan struct{} // tells Schedule of a new due time
	running  sync.Map      // "jobID/attempt" of the attempts running now
}

// wakeup returns the channel that tells Schedule of a new due time.
func (j *Jobs) wakeup() chan struct{} {
	j.wakeOnce.Do(func() { j.wake = make(chan struct{}, 1) })
	return j.wake
}

// poke tells Schedule that a job now waits for a time.
func (j *Jobs) poke() {
	select {
	case j.wakeup() <- struct{}{}:
	default:
	}
}

// Submitted is the answer to a submit.
type Submitted struct {
	JobID   string   `json:"jobId,omitempty"`
	BatchID *string  `json:"batchId"`
	JobIDs  []string `json:"jobIds,omitempty"` // a batch's jobs, in item order
	Status  string   `json:"status"`
}

// Submit accepts one job per request for the caller's branch, or none: the
// callback URL (callbackURL, else the branch's webhook URL) must be a public
// https URL, the caller must be able to verify now, every image URL must be
// one that can be fetched, and the branch's unfinished jobs must stay within
// MaxOpen (else RATE_LIMIT_EXCEEDED). It returns after the jobs are durable.
func (j *Jobs) Submit(ctx context.Context, serviceID, branchID string, reqs []verify.Request, callbackURL string, batch bool) (Submitted, error) {
	br, err := j.Verifier.Admit(serviceID, branchID)
	if err != nil {
		return Submitted{}, err
	}
	// The bound is checked again when the jobs are stored; this early check
	// spares a branch at its bound the callback URL's lookup.
	if j.MaxOpen > 0 {
		n, err := j.Store.UnfinishedJobs(serviceID, branchID)
		if err != nil {
			return Submitted{}, api.Internal(err)
		}
		if n+len(reqs) > j.MaxOpen {
			return Submitted{}, j.tooMany()
		}
	}
	branchHook := callbackURL == "" && br.WebhookURL != nil
	if branchHook {
		callbackURL = *br.WebhookURL
	}
	if callbackURL == "" {
		return Submitted{}, api.Errorf(api.Validation, "callbackUrl: required when the branch has no webhook URL")
	}
	if err := j.Egress.CheckCallbackURL(ctx, callbackURL); err != nil {
		var e *api.Error
		if branchHook && errors.As(err, &e) && e.Code == api.InvalidCallbackURL {
			// The client sent no callbackUrl: say which URL is at fault.
			return Submitted{}, &api.Error{Code: e.Code, Cause: e.Cause,
				Message: "no callbackUrl was sent, and the branch's webhookUrl is not https at a public address"}
		}
		return Submitted{}, err
	}
	for i, r := range reqs {
		if r.Source.URL == "" {
			continue
		}
		if err := j.Egress.CheckImageURL(r.Source.URL); err != nil {
			return Submitted{}, itemError(i, batch, "url", err)
		}
	}
	var out Submitted
	if batch {
		id := uuid.NewString()
		out.BatchID = &id
	}
	now := j.Now().UnixMilli()
	jobs, msgs := make([]store.Job, len(reqs)), make([]store.Message, len(reqs))
	for i, r := range reqs {
		raw, err := json.Marshal(r)
		if err != nil {
			return Submitted{}, api.Internal(err)
		}
		jobs[i] = store.Job{ID: uuid.NewString(), ServiceID: serviceID, BranchID: branchID, Created: now,
			Status: Queued, Request: raw, CallbackURL: callbackURL, Attempt: 1}
		if out.BatchID != nil {
			jobs[i].BatchID = *out.BatchID
		}
		msgs[i] = jobMessage(jobs[i].ID, 1)
		out.JobIDs = append(out.JobIDs, jobs[i].ID)
	}
	err = j.Store.CreateJobs(jobs, msgs, j.MaxOpen, reqs[0].Nonce) // one request's, a batch's too
	if errors.Is(err, store.ErrTooManyJobs) {
		return Submitted{}, j.tooMany()
	}
	if err != nil {
		return Submitted{}, api.Internal(err)
	}
	out.Status = Queued
	if !batch {
		out.JobID, out.JobIDs = out.JobIDs[0], nil
	}
	return out, nil
}

// tooMany refuses jobs past the branch's bound of unfinished jobs.
func (j *Jobs) tooMany() error {
	return api.Errorf(api.RateLimitExceeded, fmt.Sprintf(
		"a branch may have at most %d unfinished async jobs; submit again when some have finished", j.MaxOpen))
}

// itemError names the item and field of a refused request.
func itemError(i int, batch bool, field string, err error) error {
	if batch {
		field = fmt.Sprintf("items[%d].%s", i, field)
	}
	return api.Within(err, field)
}

func jobMessage(jobID string, attempt int) store.Message {
	return message(api.TopicJobs, jobID, api.JobMessage{EventID: uuid.NewString(), JobID: jobID, Attempt: attempt})
}

func message(topic, key string, v any) store.Message {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // the contract types always encode
	}
	return store.Message{Topic: topic, Key: key, Value: raw}
}

// View is a job as its branch polls it.
type View struct {
	JobID   string          `json:"jobId"`
	BatchID *string         `json:"batchId"`
	Status  string          `json:"status"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Poll returns a job of the caller's branch; another branch's, an unknown
// or an expired job is JOB_NOT_FOUND.
func (j *Jobs) Poll(serviceID, branchID, jobID string) (View, error) {
	job, err := j.Store.Job(jobID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return View{}, api.E(api.JobNotFound)
	case err != nil:
		return View{}, api.Internal(err)
	case job.ServiceID != serviceID || job.BranchID != branchID || j.expired(job):
		return View{}, api.E(api.JobNotFound)
	}
	v := View{JobID: job.ID, Status: job.Status, Result: job.Result, Error: job.Error}
	if job.BatchID != "" {
		v.BatchID = &job.BatchID
	}
	return v, nil
}

func (j *Jobs) expired(job store.Job) bool {
	return j.Now().Sub(time.UnixMilli(job.Created)) >= j.Retention
}

// HandleJob runs the attempt a slip.jobs message asks for, if the job still
// waits for it, and records its outcome with the messages it causes.
func (j *Jobs) HandleJob(ctx context.Context, m kafka.Message) error {
	var msg api.JobMessage
	if err := json.Unmarshal(m.Value, &msg); err != nil {
		j.Log.Error("skipping a malformed job message", "offset", m.Offset, "err", err)
		return nil
	}
	// The same message twice at once (a publisher's resend, handled by two
	// workers) would send the bank lookup twice: the second waits for
	// nothing and is done with. core is one process, so this is enough; an
	// attempt cut by a crash runs again from its redelivered message.
	attempt := fmt.Sprint(msg.JobID, "/", msg.Attempt)
	if _, busy := j.running.LoadOrStore(attempt, struct{}{}); busy {
		return nil
	}
	defer j.running.Delete(attempt)
	waiting := func(job *store.Job) error {
		if job.Attempt != msg.Attempt || (job.Status != Queued && job.Status != Processing) {
			return errStale
		}
		return nil
	}
	job, err := j.Store.UpdateJob(msg.JobID, func(job *store.Job) ([]store.Message, error) {
		if err := waiting(job); err != nil {
			return nil, err
		}
		job.Status = Processing
		return nil, nil
	})
	if errors.Is(err, errStale) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var (
		req      verify.Request
		res      verify.BankResult
		verr     error
		resolved string
	)
	if err := json.Unmarshal(job.Request, &req); err != nil {
		// A request this core cannot read never will: the job fails, and
		// the jobs behind it in the topic go on.
		verr = api.Internal(fmt.Errorf("job %s: request: %w", job.ID, err))
	} else {
		req.Version, req.ServiceID, req.BranchID, req.JobID = api.V2, job.ServiceID, job.BranchID, job.ID
		req.Resolved = func(p string) { resolved = p }
		res, verr = j.Verifier.Bank(ctx, req)
		if err := ctx.Err(); err != nil && verr != nil {
			// The stop's grace ended the attempt (a bank lookup or an image
			// fetch cut short): that is no outcome. The job stays processing
			// and its message, not committed, runs the attempt again after
			// the restart. An attempt that succeeded meanwhile is recorded.
			return err
		}
	}
	sign, err := j.signer(job.ServiceID, job.BranchID)
	switch {
	case errors.Is(err, errSecret):
		// It will not open later either (SLIP_MASTER_KEY is not the one
		// that sealed it). The outcome is kept for polling and no callback
		// is sent (an unsigned one would teach the receiver to take
		// unsigned ones), rather than holding up every job behind this one.
		j.Log.Error("webhook secret cannot be opened; the job's outcome is kept, its callback not sent",
			"job", job.ID, "branch", job.BranchID, "err", err)
	case err != nil:
		return err
	case sign == nil: // the branch was deleted after the job was accepted
		verr = api.E(api.BranchInactive)
	}
	_, err = j.Store.UpdateJob(job.ID, func(job *store.Job) ([]store.Message, error) {
		if err := waiting(job); err != nil {
			return nil, err
		}
		if resolved != "" {
			if err := keepPayload(job, resolved); err != nil {
				return nil, err
			}
		}
		return j.settle(job, res, verr, sign)
	})
	return j.updated(err)
}

// settle moves a job on from the outcome of its attempt: a verified slip
// is done; a slip not found or pending waits for the next attempt while the
// budget lasts and is then done as not_found; any other error fails it.
func (j *Jobs) settle(job *store.Job, res verify.BankResult, verr error, sign func([]byte) string) ([]store.Message, error) {
	var e *api.Error
	if verr != nil && !errors.As(verr, &e) {
		e = &api.Error{Code: api.InternalServerError, Cause: verr}
	}
	switch {
	case verr == nil:
		return j.finish(job, Done, "success", res, nil, sign)
	case e.Code == api.SlipNotFound || e.Code == api.SlipPending:
		if job.Attempt <= len(j.VerifyRetries) {
			job.Status = Retrying
			job.DueAt = j.Now().Add(j.VerifyRetries[job.Attempt-1]).UnixMilli()
			job.Attempt++
			return nil, nil
		}
		_, body := api.V2Body(e)
		return j.finish(job, Done, "not_found", notFound{Attempts: job.Attempt, Reason: body.Code, Message: body.Message}, nil, sign)
	}
	if e.Code >= api.InternalServerError {
		j.Log.Error("job failed", "job", job.ID, "err", e.Error())
	}
	_, body := api.V2Body(e)
	return j.finish(job, Failed, "failed", nil, &body, sign)
}

// signer returns what signs the branch's callbacks: the X-Service-Signature
// value of a body under the branch's webhook secret, or "" when the branch
// has none. It returns nil when the branch is gone: its secret went with
// it, and an unsigned callback for a branch that had one would teach its
// receiver to take unsigned ones, so none is sent.
func (j *Jobs) signer(serviceID, branchID string) (func([]byte) string, error) {
	br, err := j.Store.Branch(serviceID, branchID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(br.WebhookSecret) == 0 {
		return func([]byte) string { return "" }, nil
	}
	key, err := j.Box.Open(br.WebhookSecret, secret.WebhookLabel(br.ID))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSecret, err)
	}
	return func(body []byte) string {
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(body)
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}, nil
}

// errSecret means a branch's webhook secret cannot be opened.
var errSecret = errors.New("jobs: the branch's webhook secret cannot be opened")

// errStale refuses a change a job has moved past: a message for an attempt
// or delivery it no longer waits for.
var errStale = errors.New("jobs: stale message")

// updated ends the handling of a message that changed a job: a stale
// message or a job gone (expired) is done with; a change that may have
// set a due time wakes the scheduler.
func (j *Jobs) updated(err error) error {
	if errors.Is(err, errStale) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err == nil {
		j.poke()
	}
	return err
}

// keepPayload replaces the image or image URL of a job's request by the
// slip payload read from it: a job that waits for its next attempt holds a
// few hundred bytes instead of up to 4 MB, and its next attempts neither
// fetch the URL nor decode the image again.
func keepPayload(job *store.Job, payload string) error {
	var req verify.Request
	if err := json.Unmarshal(job.Request, &req); err != nil {
		return fmt.Errorf("job %s: request: %w", job.ID, err)
	}
	req.Source = verify.Source{Payload: payload}
	raw, err := json.Marshal(req)
	job.Request = raw
	return err
}

// notFound is the failure context of a not_found result.
type notFound struct {
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"` // SLIP_NOT_FOUND or SLIP_PENDING, of the last attempt
	Message  string `json:"message"`
}

// finish ends a job with its result and builds its callback, signed by
// sign; a nil sign (the branch is gone) sends none.
func (j *Jobs) finish(job *store.Job, status, result string, data any, e *api.ErrorBody, sign func([]byte) string) ([]store.Message, error) {
	now := j.Now()
	job.Status, job.DueAt = status, 0
	job.Request = nil // a finished job keeps its result, not what it was asked
	if e != nil {
		raw, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		job.Error = raw
	} else {
		raw, err := json.Marshal(struct {
			Status string `json:"status"`
			Data   any    `json:"data"`
		}{result, data})
		if err != nil {
			return nil, err
		}
		job.Result = raw
	}
	if sign == nil {
		return nil, nil
	}
	p := api.WebhookPayload{JobID: job.ID, Status: result, Data: data, Error: e,
		Timestamp: now.UTC().Format(time.RFC3339Nano)}
	if job.BatchID != "" {
		p.BatchID = &job.BatchID
	}
	body, err := p.Body()
	if err != nil {
		return nil, err
	}
	cb := api.Callback{JobID: job.ID, URL: job.CallbackURL, Body: string(body), Signature: sign(body)}
	if job.Callback, err = json.Marshal(cb); err != nil {
		return nil, err
	}
	job.Delivery = 1
	return []store.Message{j.deliver(*job)}, nil
}

// deliver returns the slip.results message of the job's current delivery.
func (j *Jobs) deliver(job store.Job) store.Message {
	var cb api.Callback
	if err := json.Unmarshal(job.Callback, &cb); err != nil {
		panic(err) // finish wrote it
	}
	cb.EventID, cb.Delivery, cb.ServiceID = uuid.NewString(), job.Delivery, job.ServiceID
	return message(api.TopicResults, job.ID, cb)
}

// delivery is one failed delivery as the polled job shows it.
type delivery struct {
	Delivery int       `json:"delivery"`
	At       time.Time `json:"at"`
	Status   int       `json:"status,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// HandleOutcome records a delivery's outcome from slip.webhook.outcomes:
// success settles the callback; a failure schedules the next delivery while
// the budget lasts, and then marks the job's error with webhook: failed and
// every delivery.
func (j *Jobs) HandleOutcome(_ context.Context, m kafka.Message) error {
	var o api.WebhookOutcome
	if err := json.Unmarshal(m.Value, &o); err != nil {
		j.Log.Error("skipping a malformed webhook outcome", "offset", m.Offset, "err", err)
		return nil
	}
	_, err := j.Store.UpdateJob(o.JobID, func(job *store.Job) ([]store.Message, error) {
		if job.Settled || len(job.Callback) == 0 || o.Delivery < 1 || job.Delivery != o.Delivery || job.DueAt != 0 {
			return nil, errStale
		}
		if o.OK {
			job.Settled = true
			return nil, nil
		}
		if o.Deferred { // nothing was sent: the same delivery, after the first retry's wait
			wait := time.Second
			if len(j.DeliveryRetries) > 0 {
				wait = j.DeliveryRetries[0]
			}
			job.DueAt = j.Now().Add(wait).UnixMilli()
			return nil, nil
		}
		var failed []delivery
		if len(job.Outcomes) > 0 {
			if err := json.Unmarshal(job.Outcomes, &failed); err != nil {
				return nil, err
			}
		}
		failed = append(failed, delivery{Delivery: o.Delivery, At: o.At, Status: o.Status, Error: truncate(o.Error, 200)})
		raw, err := json.Marshal(failed)
		if err != nil {
			return nil, err
		}
		job.Outcomes = raw
		if o.Delivery <= len(j.DeliveryRetries) {
			job.DueAt = j.Now().Add(j.DeliveryRetries[o.Delivery-1]).UnixMilli()
			job.Delivery++
			return nil, nil
		}
		job.Settled = true
		return nil, markWebhookFailed(job)
	})
	return j.updated(err)
}

// truncate returns s cut to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// markWebhookFailed adds webhook: failed and the deliveries to the job's
// error object, keeping its code and message.
func markWebhookFailed(job *store.Job) error {
	obj := map[string]json.RawMessage{}
	if len(job.Error) > 0 {
		if err := json.Unmarshal(job.Error, &obj); err != nil {
			return err
		}
	}
	obj["webhook"] = json.RawMessage(`"failed"`)
	obj["delivery"] = job.Outcomes
	raw, err := json.Marshal(obj)
	job.Error = raw
	return err
}

// Schedule sends the attempts and redeliveries that come due, until ctx is
// done.
func (j *Jobs) Schedule(ctx context.Context) error {
	for {
		next, err := j.RunDue()
		if err != nil {
			// A write refused (a full or failing disk) ends no job and stops
			// no core: what is due stays due, and the next pass sends it.
			j.Log.Error("sending due attempts and redeliveries failed; trying again", "in", scheduleRetry.String(), "err", err)
			next = j.Now().Add(scheduleRetry)
		}
		wait := time.Minute
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(j.Now()), time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-j.wakeup():
			t.Stop()
		}
	}
}

// scheduleRetry is how long Schedule waits after a failed pass.
const scheduleRetry = 5 * time.Second

// RunDue sends every attempt and redelivery due now and returns when the
// next one is due (zero when none waits).
func (j *Jobs) RunDue() (time.Time, error) {
	for {
		now := j.Now()
		ids, next, err := j.Store.DueJobs(now, 256)
		if err != nil {
			return time.Time{}, err
		}
		for _, id := range ids {
			_, err := j.Store.UpdateJob(id, func(job *store.Job) ([]store.Message, error) {
				if job.DueAt == 0 || job.DueAt > now.UnixMilli() {
					return nil, nil
				}
				job.DueAt = 0
				if job.Status == Retrying {
					job.Status = Queued
					return []store.Message{jobMessage(job.ID, job.Attempt)}, nil
				}
				return []store.Message{j.deliver(*job)}, nil
			})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return time.Time{}, err
			}
		}
		if len(ids) < 256 {
			return next, nil
		}
	}
}

// Expire removes the jobs past their retention.
func (j *Jobs) Expire() (int, error) {
	cutoff := j.Now().Add(-j.Retention)
	return store.InBatches(func(max int) (int, error) { return j.Store.ExpireJobs(cutoff, max) })
}
