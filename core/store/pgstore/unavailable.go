package pgstore

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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
