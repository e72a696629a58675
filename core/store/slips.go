package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
)

// SlipRecord remembers a verified slip within a service: when and by which
// branches it was verified, and the verified result (JSON) so a duplicate
// can be answered without asking the bank again.
type SlipRecord struct {
	FirstAt  int64           `json:"firstAt"` // Unix seconds
	Branches []string        `json:"branches"`
	Result   json.RawMessage `json:"result"`
	// Job is the async job whose verification recorded the slip, so the
	// job's repeated attempt (after a crash) is not taken for a duplicate.
	Job string `json:"job,omitempty"`
}

// ageKey is the key of the record stored under key in bucketSlipsByAge.
func (r *SlipRecord) ageKey(key []byte) []byte { return timeKey(r.FirstAt*1000, string(key)) }

// FirstSeenBy reports whether job first recorded the slip.
func (r *SlipRecord) FirstSeenBy(job string) bool { return job != "" && r.Job == job }

// VerifiedBy reports whether branch verified the slip before.
func (r *SlipRecord) VerifiedBy(branch string) bool { return slices.Contains(r.Branches, branch) }

// SlipKey returns the key under which a service remembers a slip: kind
// ("bank" or "wallet") and the slip's identity within its kind.
func SlipKey(kind string, parts ...string) string {
	k := kind
	for _, p := range parts {
		k += "/" + p
	}
	return k
}

// slipRecordV1 starts a slip record in its binary form: the version byte,
// then FirstAt, Job and Branches (each length-prefixed with a uvarint),
// then Result to the end. Records written before it are JSON objects,
// which start with '{'; both are read.
const slipRecordV1 = 1

// encode appends the binary form of r to dst. A record is written on every
// new slip: no reflection, one allocation.
func (r *SlipRecord) encode(dst []byte) []byte {
	dst = append(dst, slipRecordV1)
	dst = binary.AppendVarint(dst, r.FirstAt)
	dst = appendString(dst, r.Job)
	dst = binary.AppendUvarint(dst, uint64(len(r.Branches)))
	for _, b := range r.Branches {
		dst = appendString(dst, b)
	}
	return append(dst, r.Result...)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errBadSlipRecord = errors.New("store: slip record does not decode")

// decodeSlipRecord reads a record in either form. raw is copied: bbolt's
// values live only as long as their transaction.
func decodeSlipRecord(raw []byte) (*SlipRecord, error) {
	rec := new(SlipRecord)
	if len(raw) > 0 && raw[0] == '{' {
		return rec, json.Unmarshal(raw, rec)
	}
	if len(raw) == 0 || raw[0] != slipRecordV1 {
		return nil, errBadSlipRecord
	}
	raw = slices.Clone(raw[1:])
	first, n := binary.Varint(raw)
	if n <= 0 {
		return nil, errBadSlipRecord
	}
	rec.FirstAt, raw = first, raw[n:]
	job, raw, ok := cutString(raw)
	if !ok {
		return nil, errBadSlipRecord
	}
	count, n := binary.Uvarint(raw)
	if n <= 0 || count > uint64(len(raw)) {
		return nil, errBadSlipRecord
	}
	rec.Job, raw = job, raw[n:]
	rec.Branches = make([]string, count)
	for i := range rec.Branches {
		if rec.Branches[i], raw, ok = cutString(raw); !ok {
			return nil, errBadSlipRecord
		}
	}
	rec.Result = raw
	return rec, nil
}

// cutString reads a length-prefixed string from the start of raw.
func cutString(raw []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(raw)
	if n <= 0 || l > uint64(len(raw)-n) {
		return "", nil, false
	}
	return string(raw[n : n+int(l)]), raw[n+int(l):], true
}
