package pgstore

import "sync"

// decoded keeps the records decoded from the documents a verification
// reads every time (its service, branch and conditions), by the
// document's bytes: the same bytes decode to the same record, so a
// record decoded before stands and the decoding is saved. Records are
// shared by the snapshots that read them: never change what they point
// to.
type decoded[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// maxDecoded bounds the records a decoded keeps; it starts anew when
// full.
const maxDecoded = 4096

// into sets *v to the record of the document raw: ErrNotFound for none.
func (d *decoded[T]) into(raw []byte, v *T) error {
	if raw == nil {
		return jsonInto(raw, v)
	}
	d.mu.Lock()
	r, ok := d.m[string(raw)]
	d.mu.Unlock()
	if ok {
		*v = r
		return nil
	}
	if err := jsonInto(raw, v); err != nil {
		return err
	}
	d.mu.Lock()
	if d.m == nil || len(d.m) >= maxDecoded {
		d.m = make(map[string]T)
	}
	d.m[string(raw)] = *v
	d.mu.Unlock()
	return nil
}
