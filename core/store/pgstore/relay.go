package pgstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// relayLock is the session advisory lock of the core that relays the
// outbox to the broker: one at a time, so each message is published once
// while it holds it, in order. It is held on a connection of its own,
// which, once it holds the lock, also listens for the commits of every
// core that add messages (NOTIFY slip_outbox), so the relay hears of them
// at once; when that core stops or its connection breaks, the lock is
// free and another core's relay takes it within relayRetry.
//
// A core that does not hold the lock does not listen: every commit of
// every core would wake it for nothing. It tries the lock every
// relayRetry instead.
const relayLock int64 = 0x5e1f1000

// relayRetry is how often a core that does not relay tries to, how long a
// broken connection waits before the next, and how often at most a core
// counts the messages waiting anew.
const relayRetry = time.Second

// relay holds or seeks the relay lock until ctx is done.
type relay struct {
	held    atomic.Bool
	every   time.Duration                   // relayRetry, but for tests
	recount func(ctx context.Context) error // counts the messages waiting anew
	counted time.Time                       // of the last recount; the relay's goroutine's
	stop    context.CancelFunc
	done    chan struct{}
}

// startRelay tries the lock once before it returns, so a lone core relays
// from its start, then keeps at it in the background; signal is called
// when messages may wait for this core to publish. Every relayRetry at
// most, and when it takes the lock, it counts the messages waiting anew:
// other cores add and ack them.
func (s *Store) startRelay(ctx context.Context, signal func()) *relay {
	return s.startRelayEvery(ctx, relayRetry, signal, s.recount)
}

// startRelayEvery is startRelay with every in place of relayRetry and
// recount in place of the store's.
func (s *Store) startRelayEvery(ctx context.Context, every time.Duration, signal func(), recount func(context.Context) error) *relay {
	ctx, stop := context.WithCancel(ctx)
	r := &relay{every: every, recount: recount, stop: stop, done: make(chan struct{})}
	conn := r.dial(ctx, s, signal)
	go func() {
		defer close(r.done)
		for {
			if conn != nil {
				r.listen(ctx, conn, signal)
				conn.Close(context.Background()) // frees the lock
			}
			r.held.Store(false)
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.every):
			}
			conn = r.dial(ctx, s, signal)
		}
	}()
	return r
}

// dial opens a connection of the relay's own and tries the lock on it; it
// returns nil when either fails.
func (r *relay) dial(ctx context.Context, s *Store, signal func()) *pgx.Conn {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil
	}
	if !r.try(ctx, conn, signal) {
		conn.Close(context.Background())
		return nil
	}
	return conn
}

// listen waits for commits that add messages, signalling them, while the
// lock is held, and tries the lock every r.every while it is not, until
// the connection fails or ctx is done. It counts the messages waiting
// anew every r.every at most, however many commits there are.
func (r *relay) listen(ctx context.Context, conn *pgx.Conn, signal func()) {
	for ctx.Err() == nil {
		if r.held.Load() {
			// Relaying: woken by each commit, or when the count is due.
			wctx, cancel := context.WithDeadline(ctx, r.counted.Add(r.every))
			_, err := conn.WaitForNotification(wctx)
			cancel()
			switch {
			case err == nil:
				signal()
			case wctx.Err() == nil || conn.IsClosed():
				return // the connection failed
			}
		} else {
			// Not relaying, and not listening: woken by nothing but time.
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.every):
			}
			if !r.try(ctx, conn, signal) {
				return
			}
		}
		if time.Since(r.counted) >= r.every {
			r.count(ctx)
		}
	}
}

// try takes the lock if it is free, reporting false when the connection
// failed. Taking it, it listens for commits, then counts and signals what
// others wrote meanwhile: a commit after the LISTEN is heard, one before
// it is read by the publisher the signal wakes.
func (r *relay) try(ctx context.Context, conn *pgx.Conn, signal func()) bool {
	if r.held.Load() {
		return true
	}
	var held bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", relayLock).Scan(&held); err != nil {
		return false
	}
	if !held {
		return true
	}
	if _, err := conn.Exec(ctx, "LISTEN slip_outbox"); err != nil {
		return false // the caller closes the connection, which frees the lock
	}
	r.held.Store(true)
	r.count(ctx)
	signal()
	return true
}

// count counts the messages waiting anew, now.
func (r *relay) count(ctx context.Context) {
	r.recount(ctx) // on failure, the count stands until the next
	r.counted = time.Now()
}

// close stops seeking the lock and frees it.
func (r *relay) close() {
	r.stop()
	<-r.done
}
