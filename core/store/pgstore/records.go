package pgstore

import (
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// exists reports whether query selects a row.
func exists(q querier, query string, args ...any) (bool, error) {
	var ok bool
	err := q.QueryRow(bg, "SELECT EXISTS ("+query+")", args...).Scan(&ok)
	return ok, err
}

// InsertMissing inserts, in one transaction, every record whose id (or
// key digest) is not stored yet, and leaves stored ones as they are; a
// branch deleted at run time stays deleted.
func (s *Store) InsertMissing(r store.Records) (int, error) {
	n := 0
	err := s.write(func(t *tx) error {
		n = 0
		var deleted []string
		ids := make([]string, len(r.Branches))
		for i, b := range r.Branches {
			ids[i] = b.ID
		}
		rows, err := t.Query(bg, "SELECT id FROM branches_deleted WHERE id = ANY($1)", ids)
		if err != nil {
			return err
		}
		if deleted, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		branches := slices.DeleteFunc(slices.Clone(r.Branches), func(b store.Branch) bool { return slices.Contains(deleted, b.ID) })
		for _, br := range branches {
			known := slices.ContainsFunc(r.Services, func(sv store.Service) bool { return sv.ID == br.ServiceID })
			if !known {
				if known, err = exists(t, "SELECT 1 FROM services WHERE id = $1", br.ServiceID); err != nil {
					return err
				}
			}
			if !known {
				return store.Refuse("branch %s: unknown service %s", br.ID, br.ServiceID)
			}
			var owner string
			if err := t.QueryRow(bg, "SELECT branch_id FROM keys WHERE digest = $1", br.KeyDigest).Scan(&owner); err == nil && owner != br.ID {
				return store.Refuse("branch %s: its key belongs to branch %s", br.ID, owner)
			} else if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		inserted := func(query string, args ...any) (bool, error) {
			tag, err := t.Exec(bg, query+" ON CONFLICT DO NOTHING", args...)
			if err == nil && tag.RowsAffected() == 1 {
				n++
				return true, nil
			}
			return false, err
		}
		for _, sv := range r.Services {
			created, err := inserted("INSERT INTO services (id, doc) VALUES ($1, $2)", sv.ID, mustJSON(sv))
			if created {
				err = errors.Join(newCounter(t, "s/"+sv.ID), s.audit(t, store.Change{Actor: api.AuditActor{Type: api.ActorSeed, ID: "seed"}},
					"service.create", sv.ID, api.AuditTarget{Type: "service", ID: sv.ID}, nil, sv))
			}
			if err != nil {
				return err
			}
		}
		for _, br := range branches {
			// A branch's key is indexed when the branch is created, so a key
			// replaced at run time is not brought back by the next start.
			created, err := inserted("INSERT INTO branches (id, service_id, doc) VALUES ($1, $2, $3)", br.ID, br.ServiceID, mustJSON(br))
			if created {
				err = errors.Join(putKey(t, br.KeyDigest, br.ID), newCounter(t, "b/"+br.ID))
			}
			if err != nil {
				return err
			}
		}
		for _, c := range r.B2BClients {
			if found, err := exists(t, "SELECT 1 FROM b2b_clients WHERE key_digest = $1", c.KeyDigest); err != nil || found {
				if err != nil {
					return err
				}
				continue
			}
			if err := insertClient(t, &c); err != nil {
				return err
			}
			n++
		}
		for _, a := range r.Accounts {
			if _, err := inserted("INSERT INTO accounts (id, service_id, doc) VALUES ($1, $2, $3)", a.ID, a.ServiceID, mustJSON(a)); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

func newCounter(t *tx, scope string) error {
	_, err := t.Exec(bg, "INSERT INTO counters (scope) VALUES ($1) ON CONFLICT DO NOTHING", scope)
	return err
}

func putKey(t *tx, digest, branchID string) error {
	_, err := t.Exec(bg, "INSERT INTO keys (digest, branch_id) VALUES ($1, $2)", digest, branchID)
	return err
}

func dropKey(t *tx, digest string) error {
	_, err := t.Exec(bg, "DELETE FROM keys WHERE digest = $1", digest)
	return err
}

// insertClient stores a new client with the next creation number.
func insertClient(t *tx, c *store.B2BClient) error {
	if err := t.QueryRow(bg, "SELECT nextval('b2b_seq')").Scan(&c.Seq); err != nil {
		return err
	}
	_, err := t.Exec(bg, "INSERT INTO b2b_clients (key_digest, seq, service_id, doc) VALUES ($1, $2, $3, $4)", c.KeyDigest, c.Seq, c.ServiceID, mustJSON(*c))
	return err
}

// Services returns every service, deleted ones too, by id.
func (s *Store) Services() ([]store.Service, error) {
	all, err := docs[store.Service](s.reads, "SELECT doc FROM services ORDER BY id")
	now := s.now()
	for i := range all {
		all[i] = all[i].At(now)
	}
	return all, err
}

// Service returns a service as it stands now, with its counters of the
// current period.
func (s *Store) Service(id string) (store.Service, quota.Counter, int64, error) {
	var sv store.Service
	var raw []byte
	var c [3]*int64
	err := s.reads.QueryRow(bg, "SELECT s.doc, c.period, c.used, c.total FROM services s LEFT JOIN counters c ON c.scope = 's/' || s.id WHERE s.id = $1", id).
		Scan(&raw, &c[0], &c[1], &c[2])
	if errors.Is(err, pgx.ErrNoRows) {
		return sv, quota.Counter{}, 0, store.ErrNotFound
	} else if err != nil {
		return sv, quota.Counter{}, 0, err
	}
	if err := jsonInto(raw, &sv); err != nil {
		return sv, quota.Counter{}, 0, err
	}
	now := s.now()
	sv = sv.At(now)
	u := store.UsageAt(&sv, now, counter(c), quota.Counter{})
	return sv, u.Service, u.PeriodStart, nil
}

// liveService reads a service as stored, locked for the transaction:
// ErrNotFound when it is unknown or deleted.
func liveService(q querier, id string) (store.Service, error) {
	var sv store.Service
	if err := getDoc(q, &sv, "SELECT doc FROM services WHERE id = $1 FOR UPDATE", id); err != nil {
		return sv, err
	}
	if sv.State == store.StateDeleted {
		return sv, store.ErrNotFound
	}
	return sv, nil
}

// change runs a tenant's change to a service's records, refused with
// NoService when the service is unknown or deleted; the service's row is
// locked, so a deletion committed first stops it and changes of one
// service run one at a time.
func (s *Store) change(serviceID string, fn func(t *tx) error) error {
	return s.write(func(t *tx) error {
		if _, err := liveService(t, serviceID); errors.Is(err, store.ErrNotFound) {
			return store.NoService{ID: serviceID}
		} else if err != nil {
			return err
		}
		return fn(t)
	})
}

// CreateService stores a new service with its main branch and its first
// B2B client.
func (s *Store) CreateService(sv store.Service, main store.Branch, client store.B2BClient, c store.Change) error {
	return s.write(func(t *tx) error {
		taken, err := exists(t, `SELECT 1 FROM services WHERE id = $1 UNION ALL SELECT 1 FROM branches WHERE id = $2
			UNION ALL SELECT 1 FROM branches_deleted WHERE id = $2 UNION ALL SELECT 1 FROM keys WHERE digest = $3
			UNION ALL SELECT 1 FROM b2b_clients WHERE key_digest = $4`, sv.ID, main.ID, main.KeyDigest, client.KeyDigest)
		if err != nil {
			return err
		}
		if taken {
			return store.ErrExists
		}
		if _, err := t.Exec(bg, "INSERT INTO services (id, doc) VALUES ($1, $2)", sv.ID, mustJSON(sv)); err != nil {
			return err
		}
		if _, err := t.Exec(bg, "INSERT INTO branches (id, service_id, doc) VALUES ($1, $2, $3)", main.ID, sv.ID, mustJSON(main)); err != nil {
			return err
		}
		if err := errors.Join(putKey(t, main.KeyDigest, main.ID), newCounter(t, "s/"+sv.ID), newCounter(t, "b/"+main.ID)); err != nil {
			return err
		}
		if err := insertClient(t, &client); err != nil {
			return err
		}
		return s.audit(t, c, "service.create", sv.ID, api.AuditTarget{Type: "service", ID: sv.ID}, nil, sv)
	})
}

// UpdateService applies change to a stored service and writes it with its
// audit record under action.
func (s *Store) UpdateService(id, action string, c store.Change, change func(sv *store.Service, used quota.Counter, now time.Time) error) (store.Service, error) {
	var sv store.Service
	err := s.write(func(t *tx) error {
		var err error
		if sv, err = liveService(t, id); err != nil {
			return err
		}
		var cs [3]*int64
		if err := t.QueryRow(bg, "SELECT max(period), max(used), max(total) FROM counters WHERE scope = $1", "s/"+id).Scan(&cs[0], &cs[1], &cs[2]); err != nil {
			return err
		}
		now := s.now()
		state := sv.State // At's expired is a view of the end date, not a state to write
		sv = sv.At(now)
		sv.State = state
		before := sv
		if err := change(&sv, store.UsageAt(&sv, now, counter(cs), quota.Counter{}).Service, now); err != nil {
			return err
		}
		if _, err := t.Exec(bg, "UPDATE services SET doc = $2 WHERE id = $1", id, mustJSON(sv)); err != nil {
			return err
		}
		return s.audit(t, c, action, id, api.AuditTarget{Type: "service", ID: id}, before, sv)
	})
	return sv, err
}

// Branches returns the branches of a service, main first, then by id.
func (s *Store) Branches(serviceID string) ([]store.Branch, error) {
	out, err := docs[store.Branch](s.reads, "SELECT doc FROM branches WHERE service_id = $1 ORDER BY id", serviceID)
	slices.SortStableFunc(out, func(a, b store.Branch) int {
		switch {
		case a.Main == b.Main:
			return 0
		case a.Main:
			return -1
		}
		return 1
	})
	return out, err
}

// Branch returns a branch of a service, or ErrNotFound.
func (s *Store) Branch(serviceID, branchID string) (store.Branch, error) {
	var b store.Branch
	return b, branchOf(s.reads, serviceID, branchID, &b, "")
}

// branchOf reads a branch of a service; lock, when set, locks its row.
func branchOf(q querier, serviceID, branchID string, b *store.Branch, lock string) error {
	return getDoc(q, b, "SELECT doc FROM branches WHERE id = $1 AND service_id = $2 "+lock, branchID, serviceID)
}

func putBranch(t *tx, b store.Branch) error {
	_, err := t.Exec(bg, "UPDATE branches SET doc = $2 WHERE id = $1", b.ID, mustJSON(b))
	return err
}

// CreateBranch stores a new branch.
func (s *Store) CreateBranch(b store.Branch, c store.Change) error {
	return s.change(b.ServiceID, func(t *tx) error {
		taken, err := exists(t, "SELECT 1 FROM branches WHERE id = $1 UNION ALL SELECT 1 FROM keys WHERE digest = $2", b.ID, b.KeyDigest)
		if err != nil {
			return err
		}
		if taken {
			return store.Refuse("id: a branch with this id exists")
		}
		if _, err := t.Exec(bg, "INSERT INTO branches (id, service_id, doc) VALUES ($1, $2, $3)", b.ID, b.ServiceID, mustJSON(b)); err != nil {
			return err
		}
		if err := errors.Join(putKey(t, b.KeyDigest, b.ID), newCounter(t, "b/"+b.ID)); err != nil {
			return err
		}
		return s.audit(t, c, "branch.create", b.ServiceID, api.AuditTarget{Type: "branch", ID: b.ID}, nil, b)
	})
}

// UpdateBranch applies change to a branch of a service atomically.
func (s *Store) UpdateBranch(serviceID, branchID string, c store.Change, change func(*store.Branch, store.Usage) error) (store.Branch, error) {
	var q store.BranchQuota
	err := s.change(serviceID, func(t *tx) error {
		q = store.BranchQuota{}
		if err := s.quotaOf(t, serviceID, branchID, &q, "FOR UPDATE OF b"); err != nil {
			return err
		}
		before := q.Branch
		if err := change(&q.Branch, q.Usage); err != nil {
			return err
		}
		if err := putBranch(t, q.Branch); err != nil {
			return err
		}
		return s.audit(t, c, "branch.update", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, q.Branch)
	})
	return q.Branch, err
}

// DeleteBranch deletes a branch that is not its service's main branch,
// with its key and links.
func (s *Store) DeleteBranch(serviceID, branchID string, c store.Change) error {
	return s.change(serviceID, func(t *tx) error {
		var b store.Branch
		if err := branchOf(t, serviceID, branchID, &b, "FOR UPDATE"); err != nil {
			return err
		}
		if b.Main {
			return store.Refuse("branch: the main branch cannot be deleted")
		}
		accounts, err := docs[store.BankAccount](t, "SELECT doc FROM accounts WHERE service_id = $1 ORDER BY id FOR UPDATE", serviceID)
		if err != nil {
			return err
		}
		for _, a := range accounts {
			if i := slices.Index(a.Branches, branchID); i >= 0 {
				a.Branches = slices.Delete(a.Branches, i, i+1)
				if err := putAccount(t, a); err != nil {
					return err
				}
			}
		}
		if err := dropKey(t, b.KeyDigest); err != nil {
			return err
		}
		if p := b.Previous; p != nil {
			if err := dropKey(t, p.Digest); err != nil {
				return err
			}
		}
		if _, err := t.Exec(bg, `WITH c AS (DELETE FROM counters WHERE scope = $2), b AS (DELETE FROM branches WHERE id = $1)
			INSERT INTO branches_deleted (id, deleted_at) VALUES ($1, $3)`, branchID, "b/"+branchID, s.now()); err != nil {
			return err
		}
		return s.audit(t, c, "branch.delete", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, b, nil)
	})
}

// BranchByKey returns the branch whose API key has digest keyDigest, with
// its service as it stands now, the service's first B2B client and, for a
// previous key in its overlap, the instant it ends.
func (s *Store) BranchByKey(keyDigest string) (sv store.Service, br store.Branch, first *store.B2BClient, keyEnds *time.Time, err error) {
	var svDoc, brDoc, clDoc []byte
	err = s.reads.QueryRow(bg, `SELECT b.doc, s.doc, (SELECT c.doc FROM b2b_clients c WHERE c.service_id = s.id ORDER BY c.seq LIMIT 1)
		FROM keys k JOIN branches b ON b.id = k.branch_id JOIN services s ON s.id = b.service_id WHERE k.digest = $1`, keyDigest).Scan(&brDoc, &svDoc, &clDoc)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err == nil {
		err = errors.Join(jsonInto(brDoc, &br), jsonInto(svDoc, &sv))
	}
	if err != nil {
		return sv, br, nil, nil, err
	}
	now := s.now()
	if br.KeyDigest != keyDigest {
		if br.Previous == nil || br.Previous.Digest != keyDigest || !now.Before(br.Previous.ExpiresAt) {
			return sv, br, nil, nil, store.ErrNotFound
		}
		keyEnds = &br.Previous.ExpiresAt
	}
	if sv = sv.At(now); sv.State == store.StateDeleted {
		return sv, br, nil, nil, store.ErrNotFound
	}
	if clDoc != nil {
		first = new(store.B2BClient)
		err = jsonInto(clDoc, first)
	}
	return sv, br, first, keyEnds, err
}

// liveBranch reads a branch of a live service, locked.
func liveBranch(t *tx, serviceID, branchID string, b *store.Branch) error {
	if _, err := liveService(t, serviceID); err != nil {
		return err
	}
	return branchOf(t, serviceID, branchID, b, "FOR UPDATE")
}

// RotateBranchKey gives a branch the key of digest newDigest; the key it
// had keeps working for overlap.
func (s *Store) RotateBranchKey(serviceID, branchID, newDigest string, overlap time.Duration, force bool, c store.Change) (store.Branch, error) {
	var b store.Branch
	err := s.write(func(t *tx) error {
		b = store.Branch{}
		if err := liveBranch(t, serviceID, branchID, &b); err != nil {
			return err
		}
		taken, err := exists(t, "SELECT 1 FROM keys WHERE digest = $1", newDigest)
		if err != nil {
			return err
		}
		before := b
		dropped, err := b.Rotate(newDigest, taken, overlap, force, s.now())
		if err != nil {
			return err
		}
		for _, d := range dropped {
			if err := dropKey(t, d); err != nil {
				return err
			}
		}
		if err := errors.Join(putKey(t, newDigest, b.ID), putBranch(t, b)); err != nil {
			return err
		}
		return s.audit(t, c, "branch.key.rotate", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}

// RevokePreviousKey ends a branch's previous key now.
func (s *Store) RevokePreviousKey(serviceID, branchID string, c store.Change) (store.Branch, error) {
	var b store.Branch
	err := s.write(func(t *tx) error {
		b = store.Branch{}
		if err := liveBranch(t, serviceID, branchID, &b); err != nil {
			return err
		}
		if b.Previous == nil {
			return store.Refuse("branch %s has no previous key", branchID)
		}
		before := b
		if err := dropKey(t, b.Previous.Digest); err != nil {
			return err
		}
		b.Previous = nil
		if err := putBranch(t, b); err != nil {
			return err
		}
		return s.audit(t, c, "branch.key.revoke", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}

// BranchConditions returns the default conditions of a branch.
func (s *Store) BranchConditions(serviceID, branchID string) (store.Conditions, error) {
	var c store.Conditions
	var b store.Branch
	if err := branchOf(s.reads, serviceID, branchID, &b, ""); err != nil {
		return c, err
	}
	err := getDoc(s.reads, &c, "SELECT doc FROM conditions WHERE branch_id = $1", branchID)
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	return c, err
}

// SetBranchConditions replaces the default conditions of a branch.
func (s *Store) SetBranchConditions(serviceID, branchID string, cond store.Conditions, c store.Change) error {
	return s.write(func(t *tx) error {
		var b store.Branch
		if err := branchOf(t, serviceID, branchID, &b, "FOR UPDATE"); err != nil {
			return err
		}
		var before store.Conditions
		if err := getDoc(t, &before, "SELECT doc FROM conditions WHERE branch_id = $1", branchID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var err error
		if cond == (store.Conditions{}) {
			_, err = t.Exec(bg, "DELETE FROM conditions WHERE branch_id = $1", branchID)
		} else {
			_, err = t.Exec(bg, "INSERT INTO conditions (branch_id, doc) VALUES ($1, $2) ON CONFLICT (branch_id) DO UPDATE SET doc = excluded.doc", branchID, mustJSON(cond))
		}
		if err != nil {
			return err
		}
		return s.audit(t, c, "branch.conditions", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, cond)
	})
}

// Client returns the B2B client whose key has digest keyDigest, with its
// service as it stands now.
func (s *Store) Client(keyDigest string) (sv store.Service, c store.B2BClient, err error) {
	var clDoc, svDoc []byte
	err = s.reads.QueryRow(bg, "SELECT c.doc, s.doc FROM b2b_clients c JOIN services s ON s.id = c.service_id WHERE c.key_digest = $1", keyDigest).Scan(&clDoc, &svDoc)
	if errors.Is(err, pgx.ErrNoRows) {
		return sv, c, store.ErrNotFound
	}
	if err == nil {
		err = errors.Join(jsonInto(clDoc, &c), jsonInto(svDoc, &sv))
	}
	if err == nil {
		if sv = sv.At(s.now()); sv.State == store.StateDeleted {
			err = store.ErrNotFound
		}
	}
	return sv, c, err
}

// Clients returns a service's B2B clients in creation order.
func (s *Store) Clients(serviceID string) ([]store.B2BClient, error) {
	return docs[store.B2BClient](s.reads, "SELECT doc FROM b2b_clients WHERE service_id = $1 ORDER BY seq", serviceID)
}

// clientByID reads, locked, the client of a live service whose ID is id.
func clientByID(t *tx, serviceID, id string) (store.B2BClient, error) {
	if _, err := liveService(t, serviceID); err != nil {
		return store.B2BClient{}, err
	}
	var c store.B2BClient
	// An ID is the start of the key's digest (B2BClient.ID).
	err := getDoc(t, &c, "SELECT doc FROM b2b_clients WHERE service_id = $1 AND starts_with(key_digest, $2) AND length($2) = 16 FOR UPDATE", serviceID, id)
	return c, err
}

func putClient(t *tx, c store.B2BClient) error {
	_, err := t.Exec(bg, "UPDATE b2b_clients SET doc = $2 WHERE key_digest = $1", c.KeyDigest, mustJSON(c))
	return err
}

// CreateClient adds a B2B client to a live service.
func (s *Store) CreateClient(c store.B2BClient, ch store.Change) (store.B2BClient, error) {
	err := s.write(func(t *tx) error {
		if _, err := liveService(t, c.ServiceID); err != nil {
			return err
		}
		if taken, err := exists(t, "SELECT 1 FROM b2b_clients WHERE key_digest = $1", c.KeyDigest); err != nil || taken {
			if err == nil {
				err = store.ErrExists
			}
			return err
		}
		if err := insertClient(t, &c); err != nil {
			return err
		}
		return s.audit(t, ch, "client.create", c.ServiceID, api.AuditTarget{Type: "client", ID: c.ID()}, nil, c)
	})
	return c, err
}

// UpdateClient applies change to a client (its name and permissions).
func (s *Store) UpdateClient(serviceID, id string, ch store.Change, change func(*store.B2BClient)) (store.B2BClient, error) {
	var c store.B2BClient
	err := s.write(func(t *tx) error {
		var err error
		if c, err = clientByID(t, serviceID, id); err != nil {
			return err
		}
		before := c
		change(&c)
		if err := putClient(t, c); err != nil {
			return err
		}
		return s.audit(t, ch, "client.update", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}

// DeleteClient removes a client: its key is refused from now on.
func (s *Store) DeleteClient(serviceID, id string, ch store.Change) error {
	return s.write(func(t *tx) error {
		c, err := clientByID(t, serviceID, id)
		if err != nil {
			return err
		}
		if _, err := t.Exec(bg, "DELETE FROM b2b_clients WHERE key_digest = $1", c.KeyDigest); err != nil {
			return err
		}
		return s.audit(t, ch, "client.delete", serviceID, api.AuditTarget{Type: "client", ID: id}, c, nil)
	})
}

// RotateClientSecret gives a client a new secret, sealed by seal; the one
// it had keeps verifying signatures for overlap.
func (s *Store) RotateClientSecret(serviceID, id string, overlap time.Duration, force bool, ch store.Change, seal func(keyDigest string) []byte) (store.B2BClient, error) {
	var c store.B2BClient
	err := s.write(func(t *tx) error {
		var err error
		if c, err = clientByID(t, serviceID, id); err != nil {
			return err
		}
		before := c
		if err := c.Rotate(seal(c.KeyDigest), overlap, force, s.now()); err != nil {
			return err
		}
		if err := putClient(t, c); err != nil {
			return err
		}
		return s.audit(t, ch, "client.secret.rotate", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}

// Accounts returns a service's bank accounts; with branchID, only those
// linked to that branch.
func (s *Store) Accounts(serviceID, branchID string) ([]store.BankAccount, error) {
	all, err := docs[store.BankAccount](s.reads, "SELECT doc FROM accounts WHERE service_id = $1 ORDER BY id", serviceID)
	if branchID != "" {
		all = slices.DeleteFunc(all, func(a store.BankAccount) bool { return !slices.Contains(a.Branches, branchID) })
	}
	return all, err
}

func putAccount(t *tx, a store.BankAccount) error {
	_, err := t.Exec(bg, "UPDATE accounts SET doc = $2 WHERE id = $1", a.ID, mustJSON(a))
	return err
}

// CreateAccount stores a bank account (store.CheckAccount's rules).
func (s *Store) CreateAccount(a *store.BankAccount, c store.Change) error {
	return s.change(a.ServiceID, func(t *tx) error {
		all, err := docs[store.BankAccount](t, "SELECT doc FROM accounts WHERE service_id = $1 ORDER BY id", a.ServiceID)
		if err != nil {
			return err
		}
		if err := store.CheckAccount(all, a); err != nil {
			return err
		}
		for _, b := range a.Branches {
			var br store.Branch
			if err := branchOf(t, a.ServiceID, b, &br, ""); err != nil {
				return err
			}
		}
		if taken, err := exists(t, "SELECT 1 FROM accounts WHERE id = $1", a.ID); err != nil || taken {
			if err == nil {
				err = store.Refuse("id: an account with this id exists")
			}
			return err
		}
		if _, err := t.Exec(bg, "INSERT INTO accounts (id, service_id, doc) VALUES ($1, $2, $3)", a.ID, a.ServiceID, mustJSON(*a)); err != nil {
			return err
		}
		return s.audit(t, c, "account.create", a.ServiceID, api.AuditTarget{Type: "account", ID: a.ID}, nil, *a)
	})
}

// LinkAccount links (link true) or unlinks an account of a service to one
// of its branches.
func (s *Store) LinkAccount(serviceID, branchID, accountID string, link bool, c store.Change) (store.BankAccount, error) {
	var a store.BankAccount
	err := s.change(serviceID, func(t *tx) error {
		a = store.BankAccount{}
		var br store.Branch
		if err := branchOf(t, serviceID, branchID, &br, ""); err != nil {
			return err
		}
		if err := getDoc(t, &a, "SELECT doc FROM accounts WHERE id = $1 AND service_id = $2 FOR UPDATE", accountID, serviceID); err != nil {
			return err
		}
		action, err := a.Link(branchID, link)
		if err != nil {
			return err
		}
		if err := putAccount(t, a); err != nil {
			return err
		}
		return s.audit(t, c, action, serviceID, api.AuditTarget{Type: "account", ID: accountID}, nil, a)
	})
	return a, err
}
