package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Message is one Kafka record waiting in the outbox (which also holds the
// newest entries of the history, see note). The outbox is how core
// publishes: a message is written in the same transaction as the state
// change it reports (a job accepted, a quota unit consumed), so it exists
// exactly when the change does, survives a crash, and waits while the
// broker is away. A publisher sends messages in order and then acks them.
type Message struct {
	Seq   uint64 // position in the outbox, set when read
	Topic string
	Key   string
	Value []byte
}

// ErrOutboxFull refuses a message the outbox has no room for.
var ErrOutboxFull = errors.New("store: outbox full")

// enqueue appends msgs to the outbox within tx, a transaction of the
// committer (a write function or the committer itself).
func (s *Bolt) enqueue(tx *bolt.Tx, msgs ...Message) error {
	b := tx.Bucket(bucketOutbox)
	// Keys only grow: full pages (bbolt splits at half by default) halve
	// the pages each commit writes.
	b.FillPercent = 1
	for _, m := range msgs {
		s.enqueued++
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(seq), encodeMessage(m)); err != nil {
			return err
		}
	}
	return nil
}

// Emit queues a message that reports no state change of its own
// (Committer.Emit).
func (s *Bolt) Emit(m Message) error { return s.c.Emit(m) }

// Outbox returns up to max messages from the start of the outbox, oldest
// first.
func (s *Bolt) Outbox(max int) ([]Message, error) { return s.OutboxAfter(0, max) }

// OutboxAfter returns up to max messages that follow seq in the outbox,
// oldest first: a publisher reads past what it has sent while the ack of
// that is still being written.
func (s *Bolt) OutboxAfter(seq uint64, max int) ([]Message, error) {
	var out []Message
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketOutbox).Cursor()
		for k, v := c.Seek(seqKey(seq + 1)); k != nil && len(out) < max; k, v = c.Next() {
			if isHistoryKey(k) {
				continue
			}
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			m.Seq = binary.BigEndian.Uint64(k)
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// ackBatch bounds the messages one transaction of Ack deletes, so the ack
// of a long backlog holds up other writes only briefly.
const ackBatch = 10000

// Ack removes every message up to and including seq: they reached the
// broker. It removes the history's entries among them that have moved to
// bucketHistory too (see note), and keeps those still waiting.
func (s *Bolt) Ack(seq uint64) error {
	for more := true; more; {
		var done [][]byte
		messages := 0
		err := s.write(func(tx *bolt.Tx) error {
			// Positions first, deletions after: a bbolt cursor skips keys
			// when it moves after a Delete, and First after one scans
			// every emptied page.
			b := tx.Bucket(bucketOutbox)
			done, messages, more = done[:0], 0, false
			c := b.Cursor()
			for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq; k, _ = c.Next() {
				if len(done) == ackBatch {
					more = true
					break
				}
				switch {
				case !isHistoryKey(k):
					messages++
				case binary.BigEndian.Uint64(k) >= s.waitingFrom():
					continue // waits to move
				}
				done = append(done, k)
			}
			for _, k := range done {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.c.Outbox.Removed(int64(messages))
	}
	return nil
}

// OutboxStats reports how many messages wait in the outbox and how many
// Emit dropped because it was full.
func (s *Bolt) OutboxStats() (waiting, dropped int64) { return s.c.Outbox.OutboxStats() }

// OutboxReady is signalled (without blocking) after a transaction that
// added messages to the outbox commits.
func (s *Bolt) OutboxReady() <-chan struct{} { return s.c.Outbox.OutboxReady() }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// encodeMessage lays a message out as topic and key, each behind a
// two-byte length, then the value.
func encodeMessage(m Message) []byte {
	b := make([]byte, 0, 4+len(m.Topic)+len(m.Key)+len(m.Value))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Topic)))
	b = append(b, m.Topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Key)))
	b = append(b, m.Key...)
	return append(b, m.Value...)
}

func decodeMessage(b []byte) (Message, error) {
	var m Message
	field := func() (string, bool) {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(b))
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	var ok1, ok2 bool
	m.Topic, ok1 = field()
	m.Key, ok2 = field()
	if !ok1 || !ok2 {
		return m, errors.New("truncated")
	}
	m.Value = append([]byte(nil), b...)
	return m, nil
}
