package verify

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skip2/go-qrcode"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/qrscan"
)

// qrImage is a PNG of a QR code of text and what qrscan reckons it costs.
func qrImage(t *testing.T, text string) ([]byte, int64) {
	t.Helper()
	img, err := qrcode.Encode(text, qrcode.Medium, 256)
	if err != nil {
		t.Fatal(err)
	}
	c, err := qrscan.Check(img)
	if err != nil {
		t.Fatal(err)
	}
	return img, c.Cost
}

// setHooks installs the test hooks until the test ends.
func setHooks(t *testing.T, decode, wait func(int64)) {
	decodeHook, waitHook = decode, wait
	t.Cleanup(func() { decodeHook, waitHook = nil, nil })
}

// guard fails the test if ch does not deliver within a generous time: it
// only turns a hang into a failure and never paces the test.
func guard[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestDecodesStayWithinBudget: decodes that do not fit the budget together
// wait; the ones that run never hold more than the budget, and every
// waiting one runs once memory is released.
func TestDecodesStayWithinBudget(t *testing.T) {
	const text, n = "slip within the budget", 8
	img, cost := qrImage(t, text)
	limit := NewDecodeLimit(2*cost + cost/2) // two at once
	im := Images{Decodes: limit}

	var decoding atomic.Int64 // decodes inside the hook
	events := make(chan struct{}, 2*n)
	gate := make(chan struct{})
	var overdrawn atomic.Bool
	setHooks(t, func(c int64) {
		decoding.Add(1)
		if limit.InUse() > limit.Total() {
			overdrawn.Store(true)
		}
		events <- struct{}{}
		<-gate // held until the test has seen who runs and who waits
	}, func(int64) { events <- struct{}{} })

	type result struct {
		p   string
		err error
	}
	results := make(chan result, n)
	for range n {
		go func() {
			p, err := im.Payload(context.Background(), Source{Image: img}, nil)
			results <- result{p, err}
		}()
	}
	// Every call either decodes (and is held) or waits for the budget.
	for decoding.Load()+int64(limit.Waiting()) < n {
		guard(t, events, "the calls to decode or wait")
	}
	if got := decoding.Load() * cost; got > limit.Total() {
		t.Errorf("%d decodes of %d bytes ran at once: %d bytes, over the budget of %d", decoding.Load(), cost, got, limit.Total())
	}
	if decoding.Load() != 2 || limit.InUse() != 2*cost || limit.Waiting() != n-2 {
		t.Errorf("%d decoding (%d bytes reserved), %d waiting; want 2 (%d bytes) and %d", decoding.Load(), limit.InUse(), limit.Waiting(), 2*cost, n-2)
	}
	close(gate)
	for range n {
		r := guard(t, results, "the decodes to finish")
		if r.p != text || r.err != nil {
			t.Errorf("Payload = %q, %v; want %q", r.p, r.err, text)
		}
	}
	if overdrawn.Load() {
		t.Error("more than the budget was reserved at once")
	}
	if limit.InUse() != 0 || limit.Waiting() != 0 {
		t.Errorf("after all decodes: %d bytes reserved, %d waiting", limit.InUse(), limit.Waiting())
	}
}

// TestDecodeWaitCancelled: a call waiting for the budget returns as soon as
// its context ends, with a "try again" error that says why, without
// decoding; the budget is intact for the others.
func TestDecodeWaitCancelled(t *testing.T) {
	const text = "slip behind a big one"
	img, cost := qrImage(t, text)
	limit := NewDecodeLimit(cost) // one at a time
	im := Images{Decodes: limit}

	var decodes atomic.Int64
	holding, waiting := make(chan struct{}), make(chan struct{}, 1)
	gate := make(chan struct{})
	setHooks(t, func(int64) {
		if decodes.Add(1) == 1 { // the first call holds the budget
			close(holding)
			<-gate
		}
	}, func(int64) { waiting <- struct{}{} })

	first := make(chan error, 1)
	go func() {
		_, err := im.Payload(context.Background(), Source{Image: img}, nil)
		first <- err
	}()
	guard(t, holding, "the first decode")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := im.Payload(ctx, Source{Image: img}, nil)
		second <- err
	}()
	select {
	case <-waiting:
	case err := <-second:
		t.Fatalf("the second call did not wait for the budget the first holds: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the second call to wait")
	}
	cancel()
	// The first decode still holds the budget: only the cancellation can
	// end the second call now.
	err := guard(t, second, "the cancelled call to return")
	var e *api.Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.Code != api.APIServerError {
		t.Errorf("cancelled while waiting: %v; want API_SERVER_ERROR wrapping context.Canceled", err)
	}
	if decodes.Load() != 1 || limit.Waiting() != 0 || limit.InUse() != cost {
		t.Errorf("after the cancellation: %d decodes, %d waiting, %d bytes reserved; want 1, 0, %d", decodes.Load(), limit.Waiting(), limit.InUse(), cost)
	}

	// A context already done does not decode, even with the budget free.
	close(gate)
	if err := guard(t, first, "the first decode"); err != nil {
		t.Fatal(err)
	}
	if _, err := im.Payload(ctx, Source{Image: img}, nil); !errors.Is(err, context.Canceled) || decodes.Load() != 1 {
		t.Errorf("done context: %v after %d decodes", err, decodes.Load())
	}
	last := make(chan error, 1)
	go func() {
		p, err := im.Payload(context.Background(), Source{Image: img}, nil)
		if err == nil && p != text {
			err = errors.New("payload " + p)
		}
		last <- err
	}()
	if err := guard(t, last, "a decode after it all"); err != nil || limit.InUse() != 0 {
		t.Errorf("after it all: %v, %d bytes reserved", err, limit.InUse())
	}
}

// TestDecodeLimitQueue: the budget is served first come, first served (a
// large decode is not passed by smaller ones that would fit), a cost over
// the whole budget runs alone instead of waiting forever, and a waiter
// that gives up lets those behind it through.
func TestDecodeLimitQueue(t *testing.T) {
	l := NewDecodeLimit(100)
	ctx := context.Background()
	var wg sync.WaitGroup
	acquire := func(ctx context.Context, cost int64) (<-chan int64, <-chan error) {
		got, failed := make(chan int64, 1), make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := l.acquire(ctx, cost)
			if err != nil {
				failed <- err
				return
			}
			got <- n
		}()
		return got, failed
	}
	queued := make(chan struct{}, 8)
	setHooks(t, nil, func(int64) { queued <- struct{}{} })
	// waits fails the test unless the acquire whose result is got queues.
	waits := func(got <-chan int64, what string) {
		t.Helper()
		select {
		case <-queued:
		case n := <-got:
			t.Fatalf("%s reserved %d without waiting", what, n)
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s to wait", what)
		}
	}

	a, err := l.acquire(ctx, 60)
	if err != nil || a != 60 {
		t.Fatalf("acquire(60) = %d, %v", a, err)
	}
	bigCtx, giveUp := context.WithCancel(ctx)
	big, bigFailed := acquire(bigCtx, 500) // over the total: reserves all 100
	waits(big, "the large decode")
	small, _ := acquire(ctx, 10) // would fit now, but comes after the large one
	waits(small, "the small decode")
	if l.Waiting() != 2 || l.InUse() != 60 {
		t.Fatalf("%d waiting, %d in use; want 2 and 60", l.Waiting(), l.InUse())
	}
	giveUp()
	if err := guard(t, bigFailed, "the large decode to give up"); !errors.Is(err, context.Canceled) {
		t.Errorf("the large decode: %v", err)
	}
	if n := guard(t, small, "the small decode once the large one gave up"); n != 10 {
		t.Errorf("small reserved %d", n)
	}
	select {
	case n := <-big:
		t.Errorf("the large decode reserved %d after giving up", n)
	default:
	}

	big, _ = acquire(ctx, 500)
	waits(big, "the large decode, again,")
	l.release(60)
	l.release(10)
	if n := guard(t, big, "the large decode"); n != 100 || l.InUse() != 100 {
		t.Errorf("the large decode reserved %d, %d in use; want the whole budget, 100", n, l.InUse())
	}
	l.release(100)
	wg.Wait()
	if l.InUse() != 0 || l.Waiting() != 0 {
		t.Errorf("at the end: %d in use, %d waiting", l.InUse(), l.Waiting())
	}
}

// TestDecodeWaitBounded: a decode whose context never ends (a sync request)
// waits at most DecodeWait for room in the budget, then gets
// API_SERVER_ERROR.
func TestDecodeWaitBounded(t *testing.T) {
	img, cost := qrImage(t, "slip behind a held one")
	im := Images{Decodes: NewDecodeLimit(cost), DecodeWait: 20 * time.Millisecond}
	holding, gate := make(chan struct{}), make(chan struct{})
	var decodes atomic.Int64
	setHooks(t, func(int64) {
		if decodes.Add(1) == 1 {
			close(holding)
			<-gate
		}
	}, nil)
	first := make(chan error, 1)
	go func() {
		_, err := im.Payload(context.Background(), Source{Image: img}, nil)
		first <- err
	}()
	guard(t, holding, "the first decode")
	second := make(chan error, 1)
	go func() {
		_, err := im.Payload(context.Background(), Source{Image: img}, nil)
		second <- err
	}()
	err := guard(t, second, "the second call to give up waiting")
	var e *api.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Code != api.APIServerError {
		t.Errorf("waited past DecodeWait: %v; want API_SERVER_ERROR wrapping context.DeadlineExceeded", err)
	}
	close(gate)
	if err := guard(t, first, "the first decode"); err != nil {
		t.Fatal(err)
	}
}
