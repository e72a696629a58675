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
// which also listens for the commits of every core that add messages
// (NOTIFY slip_outbox), so the relay hears of them at once; when that
// core stops or its connection breaks, the lock is free and another
// core's relay takes it within relayRetry.
const relayLock int64 = 0x5e1f1000

// relayRetry is how often a core that does not relay tries to, and how
// long a broken connection waits before the next.
const relayRetry = time.Second

// relay holds or seeks the relay lock until ctx is done.
type relay struct {
	held    atomic.Bool
	recount func() // counts the messages waiting anew
	stop    context.CancelFunc
	done    chan struct{}
}

// startRelay tries the lock once before it returns, so a lone core relays
// from its start, then keeps at it in the background; signal is called
// when messages may wait for this core to publish. Every relayRetry at
// most, it counts the messages waiting anew: other cores add and ack them.
func (s *Store) startRelay(ctx context.Context, signal func()) *relay {
	ctx, stop := context.WithCancel(ctx)
	r := &relay{stop: stop, done: make(chan struct{}), recount: func() { s.recount(ctx) }}
	conn, err := s.relayConn(ctx)
	if err == nil && !r.try(ctx, conn, signal) {
		conn.Close(context.Background())
		conn = nil
	}
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
			case <-time.After(relayRetry):
			}
			if conn, err = s.relayConn(ctx); err != nil {
				conn = nil
			}
		}
	}()
	return r
}

// relayConn is a connection of the relay's own, listening for commits
// that add messages.
func (s *Store) relayConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN slip_outbox"); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listen waits for commits that add messages, signalling them while the
// lock is held, and tries the lock every relayRetry while it is not,
// until the connection fails or ctx is done.
func (r *relay) listen(ctx context.Context, conn *pgx.Conn, signal func()) {
	for ctx.Err() == nil {
		if !r.held.Load() && !r.try(ctx, conn, signal) {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, relayRetry)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		r.recount()
		switch {
		case err == nil:
			if r.held.Load() {
				signal()
			}
		case wctx.Err() == nil || conn.IsClosed():
			return // the connection failed
		}
	}
}

// try takes the lock if it is free, reporting false when the connection
// failed.
func (r *relay) try(ctx context.Context, conn *pgx.Conn, signal func()) bool {
	if r.held.Load() {
		return true
	}
	var held bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", relayLock).Scan(&held); err != nil {
		return false
	}
	if held {
		r.held.Store(true)
		signal() // what others wrote meanwhile waits
	}
	return true
}

// close stops seeking the lock and frees it.
func (r *relay) close() {
	r.stop()
	<-r.done
}
