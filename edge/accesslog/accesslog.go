// Package accesslog writes the edge's access log: one JSON line per answered
// request, with the request id the client also gets in X-Request-Id, and
// never a credential (no key, signature, token or query string).
//
// Lines are formatted into a buffer on the request path, without a system
// call or an allocation, and written by a goroutine of their own in chunks:
// when FlushBytes are waiting, every FlushInterval, and at Close. A writer
// that falls behind (a full pipe, a slow disk) never slows requests: past
// MaxPending bytes waiting, lines are dropped and counted (Dropped); with
// the chunk being written, at most twice MaxPending is held.
package accesslog

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipverify/slipverify/core/lib/jsonw"
)

// Config configures a Log. A zero field takes its default.
type Config struct {
	FlushInterval time.Duration // longest a line waits; 1s
	FlushBytes    int           // write as soon as this much waits; 64 KiB
	MaxPending    int           // bytes waiting at most, then lines drop; 8 MiB
	Tier          string        // the "tier" field; "edge"
}

// Entry is one answered request. Byte slices may alias the request; they
// are copied before Write returns.
type Entry struct {
	Start    time.Time
	ID       []byte
	Method   []byte
	Path     []byte // without the query string
	Status   int
	Code     string // the catalog code when the edge answered itself; empty when core did
	Duration time.Duration
	IP       netip.Addr
	Service  []byte // ids of the authenticated caller, empty before authentication
	Branch   []byte
	Client   []byte // B2B client id
	BytesIn  int
	BytesOut int
}

// Log is an access log. Its methods are safe for concurrent use.
type Log struct {
	w    io.Writer // under wmu
	file *os.File  // the file Open opened, under wmu; Close closes it
	path string    // its path, for Reopen
	cfg  Config

	mu     sync.Mutex
	buf    []byte // lines waiting for the writer
	lines  uint64 // in buf
	kicked bool   // the writer was told FlushBytes are waiting
	closed bool   // Close began: lines are dropped

	wmu   sync.Mutex // one chunk written at a time, in order
	spare []byte     // the buffer not in use, under wmu

	kick      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
	written   atomic.Uint64
	dropped   atomic.Uint64
	failed    atomic.Uint64
}

// New returns a Log writing to w and starts its writer; Close stops it.
func New(w io.Writer, cfg Config) *Log {
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.FlushBytes <= 0 {
		cfg.FlushBytes = 64 << 10
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 8 << 20
	}
	if cfg.Tier == "" {
		cfg.Tier = "edge"
	}
	l := &Log{
		w: w, cfg: cfg, buf: make([]byte, 0, 2*cfg.FlushBytes), spare: make([]byte, 0, 2*cfg.FlushBytes),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	go l.run()
	return l
}

// Write appends e's line. It drops the line when MaxPending bytes already
// wait for the writer, or once Close began.
func (l *Log) Write(e *Entry) {
	l.mu.Lock()
	if len(l.buf) >= l.cfg.MaxPending || l.closed {
		l.mu.Unlock()
		l.dropped.Add(1)
		return
	}
	l.buf = l.appendLine(l.buf, e)
	l.lines++
	kick := len(l.buf) >= l.cfg.FlushBytes && !l.kicked
	if kick {
		l.kicked = true
	}
	l.mu.Unlock()
	if kick {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// Dropped returns how many lines were dropped because the writer fell
// behind (or came after Close).
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Failed returns how many lines were lost to failed writes.
func (l *Log) Failed() uint64 { return l.failed.Load() }

// Lines returns how many lines were written.
func (l *Log) Lines() uint64 { return l.written.Load() }

// Flush writes every line appended so far before it returns.
func (l *Log) Flush() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	out, lines := l.buf, l.lines
	l.buf, l.lines, l.kicked = l.spare[:0], 0, false
	l.mu.Unlock()
	// Requests go on appending to the other buffer while this one is
	// written: a slow writer holds up only the lines after MaxPending.
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			l.failed.Add(lines)
		} else {
			l.written.Add(lines)
		}
	}
	if cap(out) > 8*l.cfg.FlushBytes {
		out = make([]byte, 0, 2*l.cfg.FlushBytes) // a burst's buffer is not kept
	}
	l.spare = out[:0]
}

// Close writes what waits, stops the writer and closes the file Open
// opened. Lines written after it are dropped (and counted); closing again
// does nothing.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
		<-l.stopped
		l.Flush()
		l.wmu.Lock()
		defer l.wmu.Unlock()
		if l.file != nil {
			l.closeErr = l.file.Close()
			l.file = nil
		}
	})
	return l.closeErr
}

// Reopen opens the file of a Log that Open made from a path again, so
// lines go on to a new file at that path once the old one was moved
// (log rotation; the edge reopens on SIGHUP). Lines not yet written go to
// the new file. It does nothing for a Log on stderr.
func (l *Log) Reopen() error {
	if l.path == "" {
		return nil
	}
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.file == nil { // closed meanwhile
		return f.Close()
	}
	old := l.file
	l.w, l.file = f, f
	return old.Close()
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

// Open returns the Log of a destination setting: "off" (nil, no log),
// "stderr" (stderr), or the path of a file, created if need be (mode 0640)
// and appended to (Reopen opens it again after rotation).
func Open(dest string, stderr io.Writer, cfg Config) (*Log, error) {
	switch dest {
	case "off":
		return nil, nil
	case "stderr":
		return New(stderr, cfg), nil
	}
	f, err := openFile(dest)
	if err != nil {
		return nil, err
	}
	l := New(f, cfg)
	l.file, l.path = f, dest
	return l, nil
}

func (l *Log) run() {
	defer close(l.stopped)
	t := time.NewTicker(l.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.Flush()
	}
}

// appendLine appends e as one JSON line in the shape of the tiers' slog
// lines (time, level, msg, tier first). Client-sent bytes (the method, the
// path) may be anything: jsonw escapes quotes, backslashes, control
// characters and line separators and writes invalid UTF-8 as U+FFFD, so a
// line stays one valid JSON object that no request can break or forge. HTML
// characters stay as they are (StringNoHTML): a log line is read, not put
// in a page.
func (l *Log) appendLine(b []byte, e *Entry) []byte {
	b = append(b, `{"time":"`...)
	b = e.Start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"access","tier":"`...)
	b = append(b, l.cfg.Tier...)
	b = append(b, `","id":`...)
	b = jsonw.StringNoHTML(b, e.ID)
	b = append(b, `,"method":`...)
	b = jsonw.StringNoHTML(b, e.Method)
	b = append(b, `,"path":`...)
	b = jsonw.StringNoHTML(b, e.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if e.Code != "" {
		b = append(b, `,"code":"`...)
		b = append(b, e.Code...) // catalog codes are plain ASCII
		b = append(b, '"')
	}
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, e.Duration.Microseconds(), 10)
	if e.IP.IsValid() {
		b = append(b, `,"ip":"`...)
		b = e.IP.AppendTo(b)
		b = append(b, '"')
	}
	b = appendField(b, `,"service":`, e.Service)
	b = appendField(b, `,"branch":`, e.Branch)
	b = appendField(b, `,"b2b_client":`, e.Client)
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, int64(e.BytesIn), 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, int64(e.BytesOut), 10)
	return append(b, "}\n"...)
}

func appendField(b []byte, name string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return jsonw.StringNoHTML(append(b, name...), v)
}
