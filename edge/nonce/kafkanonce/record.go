package kafkanonce

import (
	"encoding/binary"
	"errors"
)

// A record of slip.nonces carries a batch of nonces one edge accepted, in
// a binary form: one record per write rather than one per nonce, so the
// cost of Kafka (the writer's and every reader's work per record, and the
// reading back of an edge's own records) is shared by a whole batch. Its
// key is the edge's id, so one edge's records stay in order on one
// partition. The value:
//
//	version    1 byte, recordVersion
//	edge       uvarint length, bytes: the process that accepted them
//	count      uvarint
//	count times:
//	  service  uvarint length, bytes
//	  scope    uvarint length, bytes: the signing client's nonce scope
//	  nonce    16 bytes
//	  ts       varint: the request's X-Timestamp, Unix seconds
//	  window   uvarint: seconds after ts the nonce may be forgotten (ts+window: forget-after)
//	  at       varint: when it was accepted, Unix milliseconds (for the lag)
//
// Every record of one process begins with the same bytes (version and
// edge), so a reader skips its own without decoding them.
const recordVersion = 1

// maxRecord bounds one record's value; the broker takes about 1 MiB.
const maxRecord = 512 << 10

// entry is one nonce of a record.
type entry struct {
	service, scope []byte // valid until the record's buffer is reused
	nonce          [16]byte
	ts, at         int64
	window         uint64
}

var errMalformed = errors.New("kafkanonce: malformed record")

// recordHead appends a record's first bytes, those of every record of edge.
func recordHead(dst []byte, edge string) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, uint64(len(edge)))
	return append(dst, edge...)
}

// appendEntry appends one nonce to a record's entries.
func appendEntry(dst []byte, it *item, window uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(it.service)))
	dst = append(dst, it.service...)
	dst = binary.AppendUvarint(dst, uint64(len(it.client)))
	dst = append(dst, it.client...)
	dst = append(dst, it.nonce[:]...)
	dst = binary.AppendVarint(dst, it.ts)
	dst = binary.AppendUvarint(dst, window)
	return binary.AppendVarint(dst, it.at)
}

// decodeRecord calls fn with each entry of record v and returns the edge
// that published it, or errMalformed (after the entries before the fault).
func decodeRecord(v []byte, fn func(*entry)) (edge []byte, err error) {
	if len(v) == 0 || v[0] != recordVersion {
		return nil, errMalformed
	}
	v = v[1:]
	bytesOf := func() ([]byte, bool) {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return nil, false
		}
		b := v[k : k+int(n)]
		v = v[k+int(n):]
		return b, true
	}
	varint := func() (int64, bool) {
		x, k := binary.Varint(v)
		if k <= 0 {
			return 0, false
		}
		v = v[k:]
		return x, true
	}
	edge, ok := bytesOf()
	if !ok {
		return nil, errMalformed
	}
	count, k := binary.Uvarint(v)
	if k <= 0 {
		return edge, errMalformed
	}
	v = v[k:]
	var e entry
	for range count {
		if e.service, ok = bytesOf(); !ok {
			return edge, errMalformed
		}
		if e.scope, ok = bytesOf(); !ok || len(v) < 16 {
			return edge, errMalformed
		}
		copy(e.nonce[:], v)
		v = v[16:]
		if e.ts, ok = varint(); !ok {
			return edge, errMalformed
		}
		if e.window, k = binary.Uvarint(v); k <= 0 {
			return edge, errMalformed
		}
		v = v[k:]
		if e.at, ok = varint(); !ok {
			return edge, errMalformed
		}
		fn(&e)
	}
	if len(v) != 0 {
		return edge, errMalformed
	}
	return edge, nil
}
