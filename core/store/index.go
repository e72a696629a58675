package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// byService indexes the records of one bucket by their service: its keys
// are service NUL record id, without values, so one service's records are
// read without reading every other service's.
type byService struct {
	records, index []byte
}

var (
	accountsByService = byService{bucketAccounts, bucketAccountsByService}
	branchesByService = byService{bucketBranches, bucketBranchesByService}
)

// key is a record's key in the index; with id "" the prefix of all of the
// service's records.
func (byService) key(serviceID, id string) []byte { return []byte(serviceID + "\x00" + id) }

func (x byService) add(tx *bolt.Tx, serviceID, id string) error {
	return tx.Bucket(x.index).Put(x.key(serviceID, id), nil)
}

func (x byService) remove(tx *bolt.Tx, serviceID, id string) error {
	return tx.Bucket(x.index).Delete(x.key(serviceID, id))
}

// each calls fn with the stored record of each of the service's ids, in id
// order.
func (x byService) each(tx *bolt.Tx, serviceID string, fn func(v []byte) error) error {
	prefix := x.key(serviceID, "")
	records := tx.Bucket(x.records)
	c := tx.Bucket(x.index).Cursor()
	for k, _ := c.Seek(prefix); bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		v := records.Get(k[len(prefix):])
		if v == nil {
			return fmt.Errorf("index %s: %q: %w", x.index, k, ErrNotFound)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// build indexes every record, for a store written before the index.
func (x byService) build(tx *bolt.Tx) error {
	return tx.Bucket(x.records).ForEach(func(id, v []byte) error {
		var r struct {
			ServiceID string `json:"serviceId"`
		}
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%s %q: %w", x.records, id, err)
		}
		return x.add(tx, r.ServiceID, string(id))
	})
}
