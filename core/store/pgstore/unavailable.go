package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// unavailable is a read that failed because the database could not be
// reached, or the server reached is not the primary (a failover or a
// restart under way): temporary, so the client is told to try again
// (API_SERVER_ERROR), as after a write that failed, not that the platform
// failed (INTERNAL_SERVER_ERROR).
type unavailable struct{ err error }

func (e unavailable) Error() string   { return "store: database unavailable: " + e.err.Error() }
func (e unavailable) Unwrap() error   { return e.err }
func (e unavailable) Temporary() bool { return true }

// reads is the pool as the store's reads use it: each error they meet is
// passed through readErr, so every read the clients wait on (a
// verification's snapshot, a job, the history, the quota, a key's branch)
// answers "try again" while the database is out of reach.
type reads struct{ pool *pgxpool.Pool }

func (r reads) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := r.pool.Exec(ctx, sql, args...)
	return tag, readErr(err)
}

func (r reads) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, readErr(err)
	}
	return errRows{rows}, nil
}

func (r reads) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return errRow{r.pool.QueryRow(ctx, sql, args...)}
}

func (r reads) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	t, err := r.pool.BeginTx(ctx, o)
	return t, readErr(err)
}

type errRow struct{ pgx.Row }

func (r errRow) Scan(dest ...any) error { return readErr(r.Row.Scan(dest...)) }

type errRows struct{ pgx.Rows }

func (r errRows) Err() error { return readErr(r.Rows.Err()) }

// readErr is err of a read, marked unavailable when it says the database
// is out of reach.
func readErr(err error) error {
	if err != nil && unreachable(err) {
		return unavailable{err}
	}
	return err
}

// unreachable reports whether err says the database could not be reached
// or would not serve: no connection could be made (whatever the server
// said), a connection broke,
// the server is shutting down or starting (SQLSTATE class 57, operator
// intervention; class 08, connection exception), or it is a standby
// (25006, read-only transaction).
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pe):
		return pe.Code == "25006" || strings.HasPrefix(pe.Code, "57") || strings.HasPrefix(pe.Code, "08")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
