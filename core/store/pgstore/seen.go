package pgstore

import (
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/slipverify/slipverify/core/store"
)

// seen is what a verification's snapshot read of its service, branch and
// slip, with the versions of their rows (xmin: the transaction that wrote
// the row as it stands; a row changed or written again has another).
// Apply decides on it again, checking those versions in the round trip of
// its writes, instead of reading it all again first: a round trip and a
// query less a verification.
type seen struct {
	sv   store.Service
	br   store.Branch
	slip *store.SlipRecord // nil: none
	rev  [3]uint32         // the rows' xmin: service, branch, slip (0: none)
}

// guard fails (division_by_zero) unless a verification's rows have the
// versions seen.rev: $1 service, $2 branch, $3 slip key, $4 to $6 the
// versions.
const (
	guard     = "SELECT 1 / count(*) AS ok " + guardFrom
	guardFrom = `FROM services s JOIN branches b ON b.id = $2
LEFT JOIN slips sl ON sl.service_id = s.id AND sl.slip_key = $3
WHERE s.id = $1 AND s.xmin = $4 AND b.xmin = $5 AND sl.xmin IS NOT DISTINCT FROM $6`
)

// guarded reports whether err is guard's failure (in a batch run in turn:
// a blind batch runs in turn on any refusal of its statements).
func guarded(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012"
}

// errStale is a verification's write whose rows changed since its
// snapshot: it is decided again on them.
var errStale = errors.New("pgstore: the verification's rows changed since its snapshot")

// errInTurn is a blind batch's op that must read: the batch runs again,
// its ops in turn.
var errInTurn = errors.New("pgstore: the batch runs again, its ops in turn")

// slipRev is the slip row's version as guard takes it: nil for none.
func (r *seen) slipRev() *uint32 {
	if r.rev[2] == 0 {
		return nil
	}
	return &r.rev[2]
}

// into sets a snapshot's service (as it stands at the snapshot's time),
// branch and slip.
func (r *seen) into(snap *store.Snapshot) error {
	if err := snap.Of(&r.sv, &r.br); err != nil {
		return err
	}
	snap.Slip = r.slip
	return nil
}

// applySeen decides a verification on what its snapshot read and writes
// its effect, checking in the same round trip that the rows are as read
// (guard). stale says they are not, or that the decision refused: then the
// caller undoes the op's writes and decides on the rows read again.
func (s *Store) applySeen(t *tx, r *seen, slipKey string, decide func(store.Snapshot) (store.Effect, error)) (snap store.Snapshot, stale bool, err error) {
	snap.At = s.now()
	if r.into(&snap) != nil {
		return snap, true, nil
	}
	if snap.Usage, err = t.usage(&snap); err != nil {
		return snap, false, err
	}
	e, err := decide(snap)
	if err != nil {
		return snap, true, nil // a refusal is given on the rows as they stand
	}
	if err := s.apply(t, &snap, slipKey, e, r); !errors.Is(err, errStale) {
		return snap, false, err
	}
	return snap, true, nil
}

// seenCache holds the seen of the snapshots whose verifications have not
// applied yet, by service, branch and slip key. A snapshot followed by no
// Apply (a refusal, a free re-read) leaves its entry, so the cache is
// emptied when full.
type seenCache struct {
	mu sync.Mutex
	m  map[string]*seen
}

// maxSeen bounds the entries of a seenCache: far more than the
// verifications a core has between their snapshot and their write.
const maxSeen = 4096

func seenKey(serviceID, branchID, slipKey string) string {
	return serviceID + "\x00" + branchID + "\x00" + slipKey
}

func (c *seenCache) put(serviceID, branchID, slipKey string, r *seen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxSeen {
		c.m = make(map[string]*seen)
	}
	c.m[seenKey(serviceID, branchID, slipKey)] = r
}

// take removes and returns the entry of a verification; nil for none.
func (c *seenCache) take(serviceID, branchID, slipKey string) *seen {
	k := seenKey(serviceID, branchID, slipKey)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[k]
	delete(c.m, k)
	return r
}
