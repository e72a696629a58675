// Command openloop sends requests at a fixed arrival rate (an open-loop
// load, as wrk2 does and wrk cannot) and reports the latency distribution.
//
// Request i is due at start + i/rate whether or not earlier ones have been
// answered. A pacer hands due times to a fixed set of connections (like
// wrk's -c); each sends a request, reads the whole answer, and takes the next
// due time. Two latencies are recorded per request:
//
//   - from its due time (lat): includes any wait for a free connection and
//     the pacer's own lateness, so a stall of the server counts for every
//     request that should have been sent during it (no coordinated omission);
//   - from the moment it was written (svc): what the server and the network
//     took, without the generator's timer jitter (Go's timers wake about
//     1 ms late when the process is otherwise idle).
//
// The client is a minimal HTTP/1.1 keep-alive client over raw TCP (one
// request in flight per connection, Content-Length bodies), so that the
// generator costs as little CPU as possible on the core it shares with the
// upstream.
//
// Run it with GOMAXPROCS=2 (even on one core) so the pacer's thread, asleep
// in a system call, never holds the only P the connections need.
//
// Modes: bearer (Authorization: Bearer <key>) and signed (spec 5.2: X-API-Key,
// X-Timestamp, a fresh UUID v4 X-Nonce and the HMAC-SHA256 X-Signature),
// both POST /v2/verify/bank with the same body as the wrk scripts.
//
// The result is one line of key=value pairs, latencies in microseconds:
//
//	target=a rate=20000 achieved=19998 sent=200000 ok=200000 non200=0 errors=0 p50=.. p90=.. p99=.. p999=.. max=.. svc_p50=.. svc_p99=.. lag_p99=..
package main

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"log"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const prSetTimerSlack = 29 // prctl(2) PR_SET_TIMERSLACK

const body = `{"payload":"0041000600000101030040220015353134529BPM054705102TH9104C0D5","amount":1500}`

func main() {
	addr := flag.String("addr", "127.0.0.1:18180", "host:port to load")
	name := flag.String("name", "", "target name printed with the result")
	mode := flag.String("mode", "bearer", "bearer or signed")
	key := flag.String("key", "", "branch key (UUID v4)")
	secret := flag.String("secret", "", "signing secret (signed mode)")
	rate := flag.Float64("rate", 10000, "requests per second")
	duration := flag.Duration("duration", 10*time.Second, "measured duration")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured load at the same rate first")
	conns := flag.Int("conns", 64, "connections (requests in flight at most)")
	flag.Parse()
	if *key == "" || *rate <= 0 || *conns < 1 || (*mode == "signed" && *secret == "") || (*mode != "bearer" && *mode != "signed") {
		log.Fatal("openloop: need -key, a positive -rate and -conns, -mode bearer|signed and -secret for signed")
	}
	g, err := newGen(*addr, *mode == "signed", *key, *secret)
	if err != nil {
		log.Fatal(err)
	}

	// connections are opened once and kept for warm-up and measurement
	ws := make([]*worker, *conns)
	for i := range ws {
		w, err := g.newWorker()
		if err != nil {
			log.Fatal(err)
		}
		ws[i] = w
	}
	if *warmup > 0 {
		g.run(ws, *rate, *warmup)
	}
	res := g.run(ws, *rate, *duration)
	us := func(v []int64, p float64) float64 {
		if len(v) == 0 {
			return 0
		}
		i := max(0, min(len(v)-1, int(p*float64(len(v))+0.5)-1)) // nearest rank
		return float64(v[i]) / 1e3
	}
	slices.Sort(res.lat)
	slices.Sort(res.svc)
	slices.Sort(res.lag)
	fmt.Printf("target=%s rate=%.0f achieved=%.0f sent=%d ok=%d non200=%d errors=%d p50=%.0f p90=%.0f p99=%.0f p999=%.0f max=%.0f svc_p50=%.0f svc_p99=%.0f svc_p999=%.0f lag_p50=%.0f lag_p99=%.0f\n",
		*name, *rate, float64(res.done)/res.elapsed.Seconds(), res.sent, res.ok, res.non200, res.errors,
		us(res.lat, .50), us(res.lat, .90), us(res.lat, .99), us(res.lat, .999), us(res.lat, 1),
		us(res.svc, .50), us(res.svc, .99), us(res.svc, .999), us(res.lag, .50), us(res.lag, .99))
	if res.non200 > 0 || res.errors > 0 {
		os.Exit(1)
	}
}

type gen struct {
	addr        string
	signed      bool
	key         string
	secret      []byte
	noncePrefix string
	bodyHash    string
	head        string // request line and fixed headers
	seq         atomic.Uint64
}

// newGen returns the generator of requests to addr.
func newGen(addr string, signed bool, key, secret string) (*gen, error) {
	g := &gen{addr: addr, signed: signed, key: key, secret: []byte(secret)}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	// UUID v4 nonces: 44 random bits for this process, then a counter
	g.noncePrefix = fmt.Sprintf("%08x-%04x-4%03x-8", uint32(r[0])<<24|uint32(r[1])<<16|uint32(r[2])<<8|uint32(r[3]),
		uint16(r[4])<<8|uint16(r[5]), 0)
	sum := sha256.Sum256([]byte(body))
	g.bodyHash = hex.EncodeToString(sum[:])
	g.head = "POST /v2/verify/bank HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n"
	return g, nil
}

type worker struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte // the request being sent
	sts  []byte // string to sign
	mac  hash.Hash
	lat  []int64
	svc  []int64
	lag  []int64
}

func (g *gen) newWorker() (*worker, error) {
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		return nil, err
	}
	return &worker{conn: c, r: bufio.NewReaderSize(c, 16<<10), mac: hmac.New(sha256.New, g.secret)}, nil
}

// redial replaces the worker's broken connection with a new one. Only the
// connection and its reader change: the latencies the worker recorded so
// far stay, and its scratch buffers are reused. When the dial fails the
// worker keeps the closed connection, and its next request fails at once.
func (w *worker) redial(g *gen) {
	w.conn.Close()
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		return
	}
	w.conn = c
	w.r.Reset(c)
}

type result struct {
	lat, svc, lag                  []int64 // ns
	sent, done, ok, non200, errors int64
	elapsed                        time.Duration
}

// run loads the target at rate for d over the workers' connections.
func (g *gen) run(ws []*worker, rate float64, d time.Duration) result {
	total := int64(rate * d.Seconds())
	interval := float64(time.Second) / rate
	due := make(chan int64, total) // due times, Unix ns: never blocks the pacer
	var (
		wg                   sync.WaitGroup
		ok, non200, errs, dn atomic.Int64
	)
	for _, w := range ws {
		w.lat, w.svc, w.lag = w.lat[:0], w.svc[:0], w.lag[:0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range due {
				sent := time.Now().UnixNano()
				status, err := w.do(g)
				now := time.Now().UnixNano()
				dn.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
					w.redial(g)
				case status != 200:
					non200.Add(1)
				default:
					ok.Add(1)
				}
				w.lat = append(w.lat, now-t)
				w.svc = append(w.svc, now-sent)
				w.lag = append(w.lag, sent-t)
			}
		}()
	}
	// The pacer sleeps in nanosleep(2) on a thread of its own rather than in
	// time.Sleep: the runtime's timers wake an idle process only at
	// millisecond steps (its epoll wait has millisecond resolution), which
	// would send the requests in bursts, each up to 1 ms late.
	start := time.Now()
	startNs := start.UnixNano()
	var sent int64
	paced := make(chan struct{})
	go func() {
		defer close(paced)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0) // 1 ns slack for this thread's sleeps
		for sent < total {
			n := min(total, int64(float64(time.Since(start))/interval)+1)
			for ; sent < n; sent++ {
				due <- startNs + int64(float64(sent)*interval)
			}
			if w := time.Duration(float64(sent)*interval) - time.Since(start); w > 0 {
				ts := syscall.NsecToTimespec(int64(w))
				syscall.Nanosleep(&ts, nil)
			}
		}
	}()
	<-paced
	close(due)
	wg.Wait()
	res := result{elapsed: time.Since(start), sent: sent, done: dn.Load(), ok: ok.Load(), non200: non200.Load(), errors: errs.Load()}
	for _, w := range ws {
		res.lat = append(res.lat, w.lat...)
		res.svc = append(res.svc, w.svc...)
		res.lag = append(res.lag, w.lag...)
	}
	return res
}

// do sends one request on the worker's connection and reads the answer,
// returning its status code.
func (w *worker) do(g *gen) (int, error) {
	b := append(w.buf[:0], g.head...)
	if g.signed {
		var ts, nonce [40]byte
		tsb := strconv.AppendInt(ts[:0], time.Now().Unix(), 10)
		nb := fmt.Appendf(nonce[:0], "%s%03x-%012x", g.noncePrefix, 0, g.seq.Add(1))
		w.sts = append(append(append(append(append(w.sts[:0], "POST\n/verify/bank\n"...), tsb...), '\n'), nb...), '\n')
		w.sts = append(w.sts, g.bodyHash...)
		w.mac.Reset()
		w.mac.Write(w.sts)
		var sum [sha256.Size]byte
		b = append(b, "X-API-Key: "...)
		b = append(b, g.key...)
		b = append(b, "\r\nX-Timestamp: "...)
		b = append(b, tsb...)
		b = append(b, "\r\nX-Nonce: "...)
		b = append(b, nb...)
		b = append(b, "\r\nX-Signature: "...)
		b = hex.AppendEncode(b, w.mac.Sum(sum[:0]))
		b = append(b, "\r\n"...)
	} else {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, g.key...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	w.buf = b
	if _, err := w.conn.Write(b); err != nil {
		return 0, err
	}
	return readResponse(w.r)
}

var errProtocol = errors.New("openloop: malformed response")

// readResponse reads one HTTP/1.1 response with a Content-Length body.
func readResponse(r *bufio.Reader) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, errProtocol
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, errProtocol
	}
	length := -1
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 { // the blank line
			break
		}
		if len(h) > 15 && bytes.EqualFold(h[:15], []byte("content-length:")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(h[15:]))); err != nil {
				return 0, errProtocol
			}
		}
	}
	if length < 0 {
		return 0, errProtocol // chunked bodies are not expected from these targets
	}
	if _, err := r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}
