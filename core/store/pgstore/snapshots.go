package pgstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/store"
)

// snapshots reads the verifications' snapshots asked for at a moment in
// one round trip: a pipeline of their queries on one connection, as the
// committer shares a transaction among the writes waiting at a moment,
// without a timer adding latency. A round trip is what a read costs
// most, in core and in PostgreSQL (a server process woken per query), so
// under load a snapshot costs a fraction of one. A few readers at once
// (snapshotReaders) keep one pipeline in flight from delaying the next.
type snapshots struct {
	s    *Store
	asks chan *snapshotAsk
	quit chan struct{}
	done sync.WaitGroup
	pool sync.Pool // asks with their channels
}

// snapshotAsk is one Snapshot's query and answer.
type snapshotAsk struct {
	serviceID, branchID, slipKey string
	snap                         store.Snapshot
	err                          error
	answered                     chan struct{}
}

const (
	snapshotReaders = 2  // pipelines in flight at once
	maxSnapshots    = 64 // snapshots a pipeline holds at most
)

func (s *Store) startSnapshots() *snapshots {
	r := &snapshots{s: s, asks: make(chan *snapshotAsk), quit: make(chan struct{})}
	for range snapshotReaders {
		r.done.Go(r.read)
	}
	return r
}

// get reads a snapshot with the others asked for meanwhile.
func (r *snapshots) get(serviceID, branchID, slipKey string) (store.Snapshot, error) {
	a, _ := r.pool.Get().(*snapshotAsk)
	if a == nil {
		a = &snapshotAsk{answered: make(chan struct{}, 1)}
	}
	a.serviceID, a.branchID, a.slipKey = serviceID, branchID, slipKey
	select {
	case r.asks <- a:
	case <-r.quit:
		return store.Snapshot{}, store.ErrClosed
	}
	<-a.answered
	snap, err := a.snap, a.err
	*a = snapshotAsk{answered: a.answered}
	r.pool.Put(a)
	return snap, err
}

// read answers the asks, each pipeline with those waiting when it starts.
func (r *snapshots) read() {
	batch := make([]*snapshotAsk, 0, maxSnapshots)
	for {
		select {
		case a := <-r.asks:
			batch = append(batch[:0], a)
		case <-r.quit:
			return
		}
	gather:
		for len(batch) < maxSnapshots {
			select {
			case a := <-r.asks:
				batch = append(batch, a)
			default:
				break gather
			}
		}
		r.pipeline(batch)
		for _, a := range batch {
			a.answered <- struct{}{}
		}
	}
}

// pipeline reads the snapshots of batch in one round trip.
func (r *snapshots) pipeline(batch []*snapshotAsk) {
	var b pgx.Batch
	for _, a := range batch {
		b.Queue(snapshotQuery, a.serviceID, a.branchID, a.slipKey, true).QueryRow(func(row pgx.Row) error {
			a.snap, a.err = r.s.snapshotOf(row, a.serviceID, a.branchID, a.slipKey)
			return nil
		})
	}
	err := r.s.pool.SendBatch(context.Background(), &b).Close()
	for _, a := range batch {
		if err != nil && a.err == nil {
			a.err = err
		}
		a.err = readErr(a.err)
	}
}

func (r *snapshots) close() {
	close(r.quit)
	r.done.Wait()
}
