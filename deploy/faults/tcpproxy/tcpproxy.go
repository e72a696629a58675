// Package tcpproxy is a TCP proxy a test controls, put between two tiers to
// make the network between them misbehave as real ones do: it adds delay,
// holds every byte during a partition (as a link that drops packets does,
// until TCP's retransmission gets them through once it heals), and resets
// every open connection.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections it accepts on a loopback port to a target
// address, one connection to the target for each.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	delay time.Duration
	// gate is closed while bytes flow; a partition replaces it with an
	// open one, which Heal closes.
	gate  chan struct{}
	links map[*link]struct{}
	done  chan struct{} // closed by Close
	wg    sync.WaitGroup
}

// link is one proxied connection: client is the accepted side, server the
// side dialled to the target.
type link struct {
	client net.Conn
	mu     sync.Mutex
	server net.Conn // nil until dialled
	once   sync.Once
	closed chan struct{}
}

// chunk is what one read gave, and when it is due at the other side.
type chunk struct {
	b   []byte
	due time.Time
}

// New starts a proxy to target on a free loopback port.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, target: target, gate: gate, links: map[*link]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port), to give the tier in front in
// place of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay makes every byte arrive d later than it was sent, in each
// direction (0: no delay). Bytes already on their way keep the delay they
// were sent with.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Partition stops every byte, of open connections and of new ones (a new
// connection is accepted but reaches the target only after Heal). Nothing is
// lost: Heal delivers what was held, in order.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // partitioned already
	}
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Reset closes every open connection with a TCP reset on both sides, bytes
// held or delayed included; new connections are proxied as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Open returns how many connections the proxy holds open.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, resets every open connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil
	default:
		close(p.done)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// current returns the gate and delay in force.
func (p *Proxy) current() (chan struct{}, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate, p.delay
}

// serve dials the target for client once bytes flow, and copies both ways
// until both directions have ended.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client, closed: make(chan struct{})}
	p.mu.Lock()
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.close()
	}()
	if !p.wait(l) {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		l.reset() // the target refused: so does the proxy
		return
	}
	if !l.setServer(server) { // reset while dialling
		server.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, client, server) }()
	go func() { defer wg.Done(); p.pipe(l, server, client) }()
	wg.Wait()
}

// wait waits until bytes flow; false when the link or the proxy closed
// first.
func (p *Proxy) wait(l *link) bool {
	for {
		gate, _ := p.current()
		select {
		case <-gate:
			// A partition may have begun since current: look again.
			if g, _ := p.current(); g == gate {
				return true
			}
		case <-l.closed:
			return false
		case <-p.done:
			return false
		}
	}
}

// pipe copies src to dst: a reader takes chunks as they come, a writer
// passes each on once its delay has passed and no partition holds it. At
// src's end it closes dst for writing, so each side sees the other's close
// as TCP carries it.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	chunks := make(chan chunk, 64)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				_, delay := p.current()
				select {
				case chunks <- chunk{buf[:n], time.Now().Add(delay)}:
				case <-l.closed:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					l.reset() // a reset, or the link closed: pass it on
				}
				return
			}
		}
	}()
	var timer *time.Timer
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-l.closed:
				return
			}
		}
		if !p.wait(l) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			l.reset()
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// setServer records the connection to the target; false when the link
// closed meanwhile.
func (l *link) setServer(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		return false
	default:
		l.server = c
		return true
	}
}

// reset closes both sides with a TCP reset.
func (l *link) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	l.closeLocked()
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked()
}

func (l *link) closeLocked() {
	l.once.Do(func() {
		close(l.closed)
		l.client.Close()
		if l.server != nil {
			l.server.Close()
		}
	})
}
