// Package kafkanonce shares the nonces of signed requests between edges,
// and with the same edge after a restart, through Kafka (slip.nonces).
//
// A Share is the Journal of the edge's nonce store: every nonce the store
// accepts goes into a bounded queue (never waiting: a full queue drops the
// nonce and counts it), and one goroutine publishes the queue in batches,
// in order, retrying a failed write before anything after it; a batch
// (whatever was queued, up to Batch) is one record (see record.go), so the
// cost of Kafka is shared by the nonces of a write. Every edge
// reads every partition of the topic itself, without a consumer group, and
// adds each nonce of another edge to its store, so a nonce accepted by one
// edge is refused by the others once its record has arrived.
//
// At start the store keeps the before-start rule (nonce.ErrBeforeStart)
// while the Share replays the topic from 2×Window+Margin ago up to the end
// it had when the replay began: a nonce can still be replayed until its
// timestamp is Window old, and a timestamp may be up to Window ahead of the
// time it was accepted, so that is how far back a still-replayable nonce may
// have been published. Then it opens the store (the spec's whole window is
// accepted) and Ready turns true. While the topic cannot be read at start
// the before-start rule holds (the fallback, shown by a metric), and the
// replay runs once it can be.
package kafkanonce

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/edge/nonce"
)

// Config configures a Share. Zero fields take their defaults.
type Config struct {
	Brokers []string
	Link    *kafkalink.Link // TLS and SASL of the brokers; nil: plaintext
	Topic   string          // api.TopicNonces
	Store   *nonce.Store
	// Queue bounds the nonces accepted but not yet published; 100,000
	// (about 8 MB). A broker outage longer than Queue nonces takes drops
	// them, counted: they are then known to this edge only.
	Queue int
	// Batch is the most nonces one write carries; 1,000.
	Batch int
	// Linger is how long a write waits for more nonces after the first,
	// unless Batch are queued; 0: none. Each write costs the edge, and
	// every edge reading it, a fixed amount of CPU whatever it carries, so
	// a linger trades that for as much more time before other edges know a
	// nonce.
	Linger time.Duration
	// Margin is how much further back than 2×Window the replay at start
	// reaches, for records published late (retried); 1 minute. The topic's
	// retention must be longer than 2×Window+Margin.
	Margin time.Duration
	// Backoff is the wait after a failed write or a failed start of the
	// reader; 1 second.
	Backoff time.Duration
	Now     func() time.Time // time.Now
	Log     *slog.Logger
}

// Share publishes the nonces its store accepts and adds those of other
// edges to it. Its methods are safe for concurrent use.
type Share struct {
	cfg    Config
	edge   string // this process, random per start
	own    []byte // the first bytes of this process's records
	window time.Duration
	queue  chan item

	replayed atomic.Bool // the replay at start is done and the store open
	fallback atomic.Bool // the topic could not be read at start, not yet replayed

	set                         *metrics.Set
	published, failures, drops  *metrics.Counter
	added, dups, expired, full  *metrics.Counter
	malformed                   *metrics.Counter
	lag                         *metrics.Histogram
	replayedNonces, replayTimeS *metrics.FloatCounter
}

// item is one accepted nonce waiting to be published.
type item struct {
	service, client string
	nonce           [16]byte
	ts, at          int64 // Unix seconds; acceptance, Unix ms
}

// New returns a Share of cfg.Store's nonces. Set it as the store's
// Journal before the store takes requests (nonce.Config.Journal), then Run
// it.
func New(cfg Config) *Share {
	if cfg.Topic == "" {
		cfg.Topic = api.TopicNonces
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 100_000
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Margin <= 0 {
		cfg.Margin = time.Minute
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var id [6]byte
	rand.Read(id[:])
	host, _ := os.Hostname()
	s := &Share{cfg: cfg, queue: make(chan item, cfg.Queue), set: metrics.NewSet(),
		edge: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(id[:]))}
	if cfg.Store != nil {
		s.window = cfg.Store.Window()
	}
	s.own = recordHead(nil, s.edge)
	s.published = s.set.NewCounter(`edge_nonces_published_total`)
	s.failures = s.set.NewCounter(`edge_nonces_publish_failures_total`)
	s.drops = s.set.NewCounter(`edge_nonces_publish_dropped_total`)
	s.set.NewGauge(`edge_nonces_publish_queued`, func() float64 { return float64(len(s.queue)) })
	s.added = s.set.NewCounter(`edge_nonces_received_total{result="added"}`)
	s.dups = s.set.NewCounter(`edge_nonces_received_total{result="duplicate"}`)
	s.expired = s.set.NewCounter(`edge_nonces_received_total{result="expired"}`)
	s.full = s.set.NewCounter(`edge_nonces_received_total{result="full"}`)
	s.malformed = s.set.NewCounter(`edge_nonces_received_total{result="malformed"}`)
	s.lag = s.set.NewHistogram(`edge_nonces_lag_seconds`)
	s.replayedNonces = s.set.NewFloatCounter(`edge_nonces_replayed_total`)
	s.replayTimeS = s.set.NewFloatCounter(`edge_nonces_replay_seconds_total`)
	s.set.NewGauge(`edge_nonces_replay_done`, func() float64 { return b2f(s.replayed.Load()) })
	s.set.NewGauge(`edge_nonces_fallback`, func() float64 { return b2f(s.fallback.Load()) })
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Edge returns this process's id, carried by the records it publishes.
func (s *Share) Edge() string { return s.edge }

// Ready reports whether the replay at start is done: the store knows every
// nonce that could still be replayed and accepts the whole window.
func (s *Share) Ready() bool { return s.replayed.Load() }

// Fallback reports whether the topic could not be read at start and the
// store still refuses timestamps before the edge started.
func (s *Share) Fallback() bool { return s.fallback.Load() }

// WritePrometheus writes the Share's metrics.
func (s *Share) WritePrometheus(w io.Writer) { s.set.WritePrometheus(w) }

// Record queues a nonce the store accepted for publishing; a full queue
// drops it, counted. It is the store's Journal: it never waits and
// allocates nothing.
func (s *Share) Record(service, client string, n [16]byte, ts int64) {
	select {
	case s.queue <- item{service: service, client: client, nonce: n, ts: ts, at: s.cfg.Now().UnixMilli()}:
	default:
		s.drops.Inc()
	}
}

// Run publishes and follows until ctx is done, then publishes what is
// queued once more (for at most a few seconds) and returns.
func (s *Share) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stream.Resume(ctx, s.cfg.Log, s.cfg.Topic+" follower", s.cfg.Backoff, s.follow)
	}()
	s.publish(ctx)
	wg.Wait()
}

// publish writes the queue to the topic in batches, in order: a batch that
// fails is written again, after Backoff, before anything queued after it,
// less the nonces whose window passed meanwhile.
func (s *Share) publish(ctx context.Context) {
	w := stream.NewWriter(s.cfg.Brokers, s.cfg.Link)
	w.MaxAttempts = 3
	defer w.Close()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var (
		batch    []item
		msgs     []kafka.Message
		logged   time.Time
		unlogged int
	)
	for {
		select {
		case it := <-s.queue:
			batch = append(batch[:0], it)
		case <-ctx.Done():
			s.flush(w)
			return
		}
		if s.cfg.Linger > 0 {
			// Wait without taking nonces meanwhile: a receive per nonce
			// would wake this goroutine for each, which costs more than
			// the rest of its work.
			linger.Reset(s.cfg.Linger)
			select {
			case <-linger.C:
			case <-ctx.Done():
				linger.Stop()
			}
		}
	fill:
		for len(batch) < s.cfg.Batch {
			select {
			case it := <-s.queue:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		for {
			var n int
			msgs, n = s.encode(msgs[:0], batch)
			if n == 0 {
				break
			}
			err := w.WriteMessages(ctx, msgs...)
			if err == nil {
				s.published.Add(n)
				break
			}
			if ctx.Err() != nil {
				s.flush(w, batch...)
				return
			}
			s.failures.Inc()
			if now := s.cfg.Now(); now.Sub(logged) >= stream.Quiet {
				s.cfg.Log.Warn("publishing nonces failed; retrying", "topic", s.cfg.Topic, "nonces", n,
					"queued", len(s.queue), "in", s.cfg.Backoff.String(), "err", err, "failures_not_logged", unlogged)
				logged, unlogged = now, 0
			} else {
				unlogged++
			}
			select {
			case <-ctx.Done():
				s.flush(w, batch...)
				return
			case <-time.After(s.cfg.Backoff):
			}
		}
	}
}

// flush writes pending and what is queued once, at stop, for at most a
// few seconds: a nonce not published is known to this edge only.
func (s *Share) flush(w *kafka.Writer, pending ...item) {
	for {
		select {
		case it := <-s.queue:
			pending = append(pending, it)
			continue
		default:
		}
		break
	}
	msgs, n := s.encode(nil, pending)
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		s.failures.Inc()
		s.cfg.Log.Warn("publishing nonces at stop failed", "topic", s.cfg.Topic, "nonces", n, "err", err)
		return
	}
	s.published.Add(n)
}

// encode appends the records of batch's nonces still inside their window
// (a record per maxRecord bytes) and returns them with the number of
// nonces they carry.
func (s *Share) encode(dst []kafka.Message, batch []item) ([]kafka.Message, int) {
	now := s.cfg.Now().Unix()
	win := int64((s.window + time.Second - 1) / time.Second)
	total := 0
	var v []byte
	count, countAt := 0, 0
	end := func() {
		if count == 0 {
			return
		}
		// The count goes before the entries: they were appended after a
		// placeholder, moved now that the count is known.
		entries := v[countAt:]
		rec := binary.AppendUvarint(append([]byte(nil), v[:countAt]...), uint64(count))
		rec = append(rec, entries...)
		dst = append(dst, kafka.Message{Topic: s.cfg.Topic, Key: []byte(s.edge), Value: rec})
		total += count
		count = 0
	}
	for i := range batch {
		it := &batch[i]
		if it.ts+win < now {
			continue // no edge accepts it any more
		}
		if count == 0 {
			v = recordHead(v[:0], s.edge)
			countAt = len(v)
		}
		v = appendEntry(v, it, uint64(win))
		if count++; len(v) >= maxRecord {
			end()
		}
	}
	end()
	return dst, total
}

// follow reads every partition of the topic, each from the first record
// published since 2×Window+Margin ago, and adds each nonce to the store,
// until ctx is done or the reader cannot start; the first time every
// partition reached the end it had when the replay began, it opens the
// store.
func (s *Share) follow(ctx context.Context) error {
	start := s.cfg.Now()
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Timeout: 5 * time.Second, Transport: s.cfg.Link.Transport()}
	parts, err := s.partitions(ctx, client)
	if err == nil {
		var from, end map[int]int64
		if from, end, err = s.offsets(ctx, client, parts, start.Add(-2*s.window-s.cfg.Margin)); err == nil {
			return s.read(ctx, parts, from, end, start)
		}
	}
	if !s.replayed.Load() && !s.fallback.Swap(true) {
		s.cfg.Log.Warn("nonces of other edges and of past starts unreadable: refusing timestamps before the start until they are read",
			"topic", s.cfg.Topic, "err", err)
	}
	return err
}

func (s *Share) partitions(ctx context.Context, client *kafka.Client) ([]int, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.cfg.Topic}})
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 {
		return nil, fmt.Errorf("%s: no such topic", s.cfg.Topic)
	}
	if t := md.Topics[0]; t.Error != nil || len(t.Partitions) == 0 {
		return nil, fmt.Errorf("%s: no partitions: %v", s.cfg.Topic, t.Error)
	}
	var parts []int
	for _, p := range md.Topics[0].Partitions {
		parts = append(parts, p.ID)
	}
	return parts, nil
}

// offsets returns, per partition, the first offset of a record stamped at
// or after since (the end when there is none) and the end.
func (s *Share) offsets(ctx context.Context, client *kafka.Client, parts []int, since time.Time) (from, end map[int]int64, err error) {
	var lastReq, timeReq []kafka.OffsetRequest
	for _, p := range parts {
		lastReq = append(lastReq, kafka.LastOffsetOf(p))
		timeReq = append(timeReq, kafka.TimeOffsetOf(p, since))
	}
	last, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{s.cfg.Topic: lastReq}})
	if err != nil {
		return nil, nil, err
	}
	at, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{s.cfg.Topic: timeReq}})
	if err != nil {
		return nil, nil, err
	}
	from, end = make(map[int]int64), make(map[int]int64)
	for _, po := range last.Topics[s.cfg.Topic] {
		if po.Error != nil {
			return nil, nil, fmt.Errorf("%s/%d: %w", s.cfg.Topic, po.Partition, po.Error)
		}
		end[po.Partition] = po.LastOffset
	}
	for _, po := range at.Topics[s.cfg.Topic] {
		if po.Error != nil {
			return nil, nil, fmt.Errorf("%s/%d: %w", s.cfg.Topic, po.Partition, po.Error)
		}
		from[po.Partition] = end[po.Partition] // no record since: nothing to replay
		for off := range po.Offsets {
			if off >= 0 && off < from[po.Partition] {
				from[po.Partition] = off
			}
		}
	}
	for _, p := range parts {
		if _, ok := end[p]; !ok {
			return nil, nil, fmt.Errorf("%s/%d: no end offset", s.cfg.Topic, p)
		}
	}
	return from, end, nil
}

// read runs a reader per partition from from to the end of time, and
// opens the store when every one has passed end. It returns the first
// reader's error (ctx's, mostly: a reader without a group retries the
// broker itself).
func (s *Share) read(parent context.Context, parts []int, from, end map[int]int64, began time.Time) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var pending atomic.Int64
	pending.Store(int64(len(parts)))
	var replayed atomic.Int64
	caughtUp := func() {
		if pending.Add(-1) == 0 && !s.replayed.Load() {
			s.cfg.Store.Open()
			s.replayed.Store(true)
			s.fallback.Store(false)
			took := s.cfg.Now().Sub(began)
			s.replayedNonces.Add(float64(replayed.Load()))
			s.replayTimeS.Add(took.Seconds())
			s.cfg.Log.Info("nonces replayed: the whole timestamp window is accepted", "topic", s.cfg.Topic,
				"partitions", len(parts), "records", replayed.Load(), "took", took.String())
		}
	}
	errc := make(chan error, len(parts))
	for _, p := range parts {
		start, stop := from[p], end[p]
		if start >= stop {
			caughtUp()
		}
		go func() {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: s.cfg.Brokers, Dialer: s.cfg.Link.Dialer(), Topic: s.cfg.Topic, Partition: p,
				MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 50 * time.Millisecond})
			defer r.Close()
			if err := r.SetOffset(start); err != nil {
				errc <- err
				return
			}
			done := start >= stop
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					errc <- err
					return
				}
				k := s.apply(m.Value, done)
				if !done {
					replayed.Add(int64(k))
					if m.Offset+1 >= stop {
						done = true
						caughtUp()
					}
				}
			}
		}()
	}
	err := <-errc
	cancel()
	for range len(parts) - 1 {
		<-errc
	}
	if parent.Err() != nil {
		return nil
	}
	return err
}

// apply adds the nonces of one record to the store, unless this process
// published it, and returns how many it carried. live: the record is read
// as it arrives, not replayed, so its age is the lag.
func (s *Share) apply(v []byte, live bool) int {
	if bytes.HasPrefix(v, s.own) {
		return 0 // this process's own: its store has them (fast path, no decoding)
	}
	var nowMs int64
	if live {
		nowMs = s.cfg.Now().UnixMilli()
	}
	n := 0
	_, err := decodeRecord(v, func(e *entry) {
		n++
		if len(e.service) == 0 || len(e.scope) == 0 {
			s.malformed.Inc()
			return
		}
		// Add does not retain the strings: these conversions are the
		// record's only allocations.
		switch err := s.cfg.Store.Add(string(e.service), string(e.scope), e.nonce, time.Unix(e.ts, 0)); {
		case err == nil:
			s.added.Inc()
		case err == nonce.ErrDuplicate:
			s.dups.Inc()
		case err == nonce.ErrOutsideWindow:
			s.expired.Inc()
		default:
			s.full.Inc()
		}
		if live && e.at > 0 {
			s.lag.Update(float64(nowMs-e.at) / 1000)
		}
	})
	if err != nil {
		s.malformed.Inc()
	}
	return n
}
