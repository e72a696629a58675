package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/store"
)

func jobMsg(id string) store.Message {
	return store.Message{Topic: "slip.jobs", Key: id, Value: []byte(`{"jobId":"` + id + `"}`)}
}

func job(t *testing.T, st *store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// TestCreateJobsAllOrNone: a batch with one taken id creates nothing and
// publishes nothing.
func TestCreateJobsAllOrNone(t *testing.T) {
	c := newClock()
	st, _ := open(t, c, store.DefaultOutboxLimit)
	ms := c.Now().UnixMilli()
	a := store.Job{ID: "a", ServiceID: "svc", BranchID: "br", Created: ms, Status: "queued", Attempt: 1,
		Request: []byte(`{"Source":{"Payload":"p"}}`), CallbackURL: "https://example.com/hook"}
	if err := st.CreateJobs([]store.Job{a}, []store.Message{jobMsg("a")}, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	got := job(t, st, "a")
	if got.ServiceID != "svc" || got.Status != "queued" || string(got.Request) != string(a.Request) ||
		got.CallbackURL != a.CallbackURL || got.Created != ms || got.Attempt != 1 {
		t.Errorf("stored job %+v, want %+v", got, a)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 || !sameMessage(msgs[0], jobMsg("a")) {
		t.Fatalf("outbox after CreateJobs: %+v", msgs)
	}

	b := store.Job{ID: "b", Created: ms, Status: "queued", Attempt: 1}
	a2 := a
	a2.Status = "overwritten"
	err := st.CreateJobs([]store.Job{b, a2}, []store.Message{jobMsg("b"), jobMsg("a")}, 0, store.Nonce{})
	if !errors.Is(err, store.ErrJobExists) {
		t.Fatalf("CreateJobs with a taken id: %v, want ErrJobExists", err)
	}
	if _, err := st.Job("b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job b of the refused batch: %v, want ErrNotFound", err)
	}
	if got := job(t, st, "a"); got.Status != "queued" {
		t.Errorf("job a changed by the refused batch: status %q", got.Status)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 {
		t.Errorf("the refused batch published: outbox holds %d messages", len(msgs))
	}
	// The refused batch left nothing in the retention index either.
	if n, err := st.ExpireJobs(c.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Errorf("ExpireJobs = %d, %v; want only job a", n, err)
	}
}

// TestUnfinishedJobsBound: CreateJobs refuses, all or none, jobs that would
// take a branch past its bound of unfinished jobs; a job stops counting when
// it gets its result or error or is removed; branches count apart; and the
// counts are rebuilt when a store from before them opens.
func TestUnfinishedJobsBound(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 0)
	create := func(branch string, ids ...string) error {
		jobs := make([]store.Job, len(ids))
		for i, id := range ids {
			jobs[i] = store.Job{ID: id, ServiceID: "svc", BranchID: branch, Created: c.Now().UnixMilli(), Status: "queued", Attempt: 1}
		}
		return st.CreateJobs(jobs, nil, 3, store.Nonce{})
	}
	update := func(id string, change func(j *store.Job)) {
		t.Helper()
		if _, err := st.UpdateJob(id, func(j *store.Job) ([]store.Message, error) { change(j); return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	want := func(err error, wantErr error, what string) {
		t.Helper()
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", what, err, wantErr)
		}
	}
	want(create("a", "a1", "a2"), nil, "2 of 3")
	want(create("a", "a3", "a4"), store.ErrTooManyJobs, "2 more")
	if _, err := st.Job("a3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job a3 of the refused batch: %v, want ErrNotFound", err)
	}
	want(create("b", "b1", "b2", "b3"), nil, "another branch's 3")
	if err := st.CreateJobs([]store.Job{{ID: "x1", ServiceID: "other", BranchID: "a"}}, nil, 1, store.Nonce{}); err != nil {
		t.Errorf("branch a of another service: %v", err)
	}

	update("a1", func(j *store.Job) { j.Status = "processing" })
	want(create("a", "a3", "a4"), store.ErrTooManyJobs, "after a1 started")
	update("a1", func(j *store.Job) { j.Status, j.Result = "done", []byte(`{"status":"success"}`) })
	want(create("a", "a3", "a4"), nil, "after a1 was done")
	want(create("a", "a5"), store.ErrTooManyJobs, "a fourth unfinished")
	update("a2", func(j *store.Job) { j.Status, j.Error = "failed", []byte(`{"code":"QUOTA_EXCEEDED"}`) })
	update("a2", func(j *store.Job) { j.Settled = true }) // a finished job changing again
	want(create("a", "a5"), nil, "after a2 failed")

	// a3, a4, a5 unfinished: the count survives a store without it
	st = reopenWithout(t, st, path, c, "jobs-unfinished")
	want(create("a", "a6"), store.ErrTooManyJobs, "reopened, a fourth unfinished")
	want(create("b", "b4"), store.ErrTooManyJobs, "reopened, b's fourth")

	// removal after retention frees the branch
	c.Advance(time.Hour)
	if n, err := st.ExpireJobs(c.Now(), 100); err != nil || n != 9 {
		t.Fatalf("ExpireJobs = %d, %v; want 9", n, err)
	}
	want(create("a", "a6", "a7", "a8"), nil, "3 after the rest expired")
}

// TestSchemaVersions: a file of an older layout opens and is upgraded (the
// counts of unfinished jobs built); a file of a newer one is refused, as a
// build of 1 refuses this build's files, so no build keeps a file it does
// not know how to keep up to date.
func TestSchemaVersions(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 0)
	if err := st.CreateJobs([]store.Job{{ID: "j1", ServiceID: "svc", BranchID: "br", Status: "queued"}}, nil, 1, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	setSchema := func(v string, drop ...string) {
		t.Helper()
		editFile(t, path, func(tx *bolt.Tx) error {
			return errors.Join(dropBuckets(tx, drop...), tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte(v)))
		})
	}
	setSchema("1", "jobs-unfinished")
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatalf("a file of layout 1: %v", err)
	}
	if err := st.CreateJobs([]store.Job{{ID: "j2", ServiceID: "svc", BranchID: "br", Status: "queued"}}, nil, 1, store.Nonce{}); !errors.Is(err, store.ErrTooManyJobs) {
		t.Errorf("upgraded from 1, the branch's unfinished job not counted: %v", err)
	}
	st.Close()
	setSchema("6")
	if st, err := store.Open(path, c.Now); err == nil {
		st.Close()
		t.Fatal("a file of layout 6 opened")
	} else if !strings.Contains(err.Error(), "schema version 6") {
		t.Errorf("refusing layout 6: %v", err)
	}
}

// TestUpdateJob: a change is stored with its messages in one step; a
// change that fails leaves the job and the outbox as they were.
func TestUpdateJob(t *testing.T) {
	c := newClock()
	st, _ := open(t, c, store.DefaultOutboxLimit)
	if err := st.CreateJobs([]store.Job{{ID: "j", Created: c.Now().UnixMilli(), Status: "queued", Attempt: 1}}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	res := store.Message{Topic: "slip.results", Key: "j", Value: []byte("callback")}
	got, err := st.UpdateJob("j", func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Result, j.Delivery = "done", []byte(`{"status":"success"}`), 1
		return []store.Message{res}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "done" {
		t.Errorf("UpdateJob returned status %q", got.Status)
	}
	if j := job(t, st, "j"); j.Status != "done" || string(j.Result) != `{"status":"success"}` || j.Delivery != 1 {
		t.Errorf("stored job after update: %+v", j)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 || !sameMessage(msgs[0], res) {
		t.Errorf("outbox after update: %+v", msgs)
	}

	refuse := errors.New("refused")
	_, err = st.UpdateJob("j", func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Result, j.DueAt = "failed", nil, c.Now().UnixMilli()
		return []store.Message{jobMsg("j")}, refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("UpdateJob with a failing change: %v, want its error", err)
	}
	if j := job(t, st, "j"); j.Status != "done" || string(j.Result) != `{"status":"success"}` || j.DueAt != 0 {
		t.Errorf("a failed change altered the job: %+v", j)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 {
		t.Errorf("a failed change published: outbox holds %d messages", len(msgs))
	}
	if ids, _, _ := st.DueJobs(c.Now().Add(time.Hour), 10); len(ids) != 0 {
		t.Errorf("a failed change made the job due: %v", ids)
	}

	called := false
	_, err = st.UpdateJob("gone", func(*store.Job) ([]store.Message, error) { called = true; return nil, nil })
	if !errors.Is(err, store.ErrNotFound) || called {
		t.Errorf("UpdateJob of an unknown job: %v (change called: %v), want ErrNotFound", err, called)
	}
}

// TestDueJobs: due jobs come earliest first, up to max, with the time of
// the next one; moving or clearing a job's due time moves it in the index.
func TestDueJobs(t *testing.T) {
	c := newClock()
	st, _ := open(t, c, store.DefaultOutboxLimit)
	t0 := c.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	jobs := []store.Job{
		{ID: "late", Created: at(0), DueAt: at(3 * time.Second)},
		{ID: "first", Created: at(0), DueAt: at(1 * time.Second)},
		{ID: "second-b", Created: at(0), DueAt: at(2 * time.Second)},
		{ID: "second-a", Created: at(0), DueAt: at(2 * time.Second)},
		{ID: "never", Created: at(0)},
	}
	if err := st.CreateJobs(jobs, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	due := func(now time.Time, max int) ([]string, time.Time) {
		t.Helper()
		ids, next, err := st.DueJobs(now, max)
		if err != nil {
			t.Fatal(err)
		}
		return ids, next
	}
	f := func(now time.Duration, max int, want []string, wantNext time.Duration) {
		t.Helper()
		ids, next := due(t0.Add(now), max)
		if !slices.Equal(ids, want) {
			t.Errorf("DueJobs(t0+%v, %d) = %v, want %v", now, max, ids, want)
		}
		var wn time.Time
		if wantNext >= 0 {
			wn = time.UnixMilli(at(wantNext))
		}
		if !next.Equal(wn) {
			t.Errorf("DueJobs(t0+%v, %d) next = %v, want %v", now, max, next, wn)
		}
	}
	f(0, 10, nil, time.Second)
	f(time.Second, 10, []string{"first"}, 2*time.Second)
	f(2*time.Second, 10, []string{"first", "second-a", "second-b"}, 3*time.Second)
	f(2*time.Second, 2, []string{"first", "second-a"}, 2*time.Second) // the third is due already
	f(time.Hour, 10, []string{"first", "second-a", "second-b", "late"}, -1)

	// Moving "first" after "late" and clearing "second-a" update the index.
	if _, err := st.UpdateJob("first", func(j *store.Job) ([]store.Message, error) { j.DueAt = at(4 * time.Second); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateJob("second-a", func(j *store.Job) ([]store.Message, error) { j.DueAt = 0; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	f(time.Second, 10, nil, 2*time.Second)
	f(time.Hour, 10, []string{"second-b", "late", "first"}, -1)
	// An update that keeps the due time keeps the job listed once.
	if _, err := st.UpdateJob("late", func(j *store.Job) ([]store.Message, error) { j.Status = "retrying"; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	f(time.Hour, 10, []string{"second-b", "late", "first"}, -1)
}

// TestExpireJobs: jobs created before the cutoff are removed, oldest
// first and at most max of them, and no longer come due.
func TestExpireJobs(t *testing.T) {
	c := newClock()
	st, _ := open(t, c, store.DefaultOutboxLimit)
	t0 := c.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	if err := st.CreateJobs([]store.Job{
		{ID: "old-due", Created: at(0), DueAt: at(time.Minute)},
		{ID: "old", Created: at(time.Second)},
		{ID: "new-due", Created: at(time.Hour), DueAt: at(time.Minute)},
	}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	expire := func(cutoff time.Duration, max, want int) {
		t.Helper()
		if n, err := st.ExpireJobs(t0.Add(cutoff), max); err != nil || n != want {
			t.Fatalf("ExpireJobs(t0+%v, %d) = %d, %v; want %d", cutoff, max, n, err, want)
		}
	}
	expire(0, 10, 0) // created at the cutoff: kept
	expire(time.Minute, 1, 1)
	if _, err := st.Job("old-due"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the oldest job after expiry: %v, want ErrNotFound", err)
	}
	job(t, st, "old")
	if ids, _, _ := st.DueJobs(t0.Add(2*time.Hour), 10); !slices.Equal(ids, []string{"new-due"}) {
		t.Errorf("due after expiry: %v, want only new-due", ids)
	}
	expire(time.Minute, 10, 1)
	if _, err := st.Job("old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job old after expiry: %v", err)
	}
	job(t, st, "new-due")
	expire(time.Minute, 10, 0)
	expire(2*time.Hour, 10, 1)
	if ids, next, _ := st.DueJobs(t0.Add(2*time.Hour), 10); len(ids) != 0 || !next.IsZero() {
		t.Errorf("due after every job expired: %v next %v", ids, next)
	}
	// A job created again with an expired one's id is a new job.
	if err := st.CreateJobs([]store.Job{{ID: "old", Created: at(3 * time.Hour)}}, nil, 0, store.Nonce{}); err != nil {
		t.Errorf("CreateJobs with an expired job's id: %v", err)
	}
}
