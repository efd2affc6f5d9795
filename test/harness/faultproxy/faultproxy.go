// Package faultproxy is a TCP relay on 127.0.0.1 that tests put between dirgate and
// a server (the Samba DC, Redis) to make that server fail on purpose: refuse
// connections as a stopped server does, hang as a wedged one does, answer slowly, or
// lose every open connection at once. It counts what it relays and the connections
// it holds, so that tests can prove a fault left nothing behind.
//
// The relay copies bytes without looking at them, so TLS passes through: a client
// that dials ldaps://127.0.0.1:<proxy port> still verifies the server's certificate
// (the harness DC's carries the SAN 127.0.0.1).
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is how the proxy treats connections.
type Mode int32

// Modes. A test switches between them at any time; the change applies to new and
// open connections alike.
const (
	// Pass relays every byte both ways (after the configured latency).
	Pass Mode = iota
	// Refuse resets every new connection as soon as it is accepted: to the client
	// this is a server whose process is gone (the dial or TLS handshake fails at
	// once). Open connections are not touched; call Cut to drop them too.
	Refuse
	// Blackhole accepts connections but relays nothing in either direction, on new
	// and open connections: a server that hangs, or a network partition. Bytes read
	// meanwhile are held, not dropped, and flow again when the mode changes, as TCP
	// would deliver them after a partition heals.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("mode(%d)", int32(m))
}

// Proxy is a running relay. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    Mode
	latency time.Duration
	// changed is closed and replaced whenever the mode changes, waking relays that
	// wait in Blackhole.
	changed chan struct{}
	conns   map[*link]struct{}
	closed  bool

	accepted atomic.Int64
	refused  atomic.Int64
	up, down atomic.Int64 // bytes relayed client->server and server->client
	wg       sync.WaitGroup
}

// link is one relayed connection: the client's side and the dialled server side.
type link struct {
	client net.Conn

	mu     sync.Mutex
	server net.Conn
	closed bool
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}

// attach records the dialled server side; it reports false (and closes server) when
// the link was cut while the dial was in progress.
func (l *link) attach(server net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = server.Close()
		return false
	}
	l.server = server
	return true
}

// Start listens on a free loopback port and relays to target (host:port, which must
// be a loopback address). The proxy is closed when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// New is Start without a test: the caller must Close the proxy.
func New(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("faultproxy: target %q is not a loopback address", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port returns the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetMode switches the proxy to m.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != m {
		p.mode = m
		close(p.changed)
		p.changed = make(chan struct{})
	}
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetLatency delays every chunk of bytes, in each direction, by d before it is
// relayed: a slow server or a long network path. 0 removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Cut closes every open connection, both sides, as a server restart or a broken
// network path does, and returns how many there were. New connections are accepted
// as the mode says.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Live returns the number of relayed connections currently open: a client that
// leaks connections to the server makes it grow.
func (p *Proxy) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Stats are the proxy's counters since it started.
type Stats struct {
	Accepted int64 // connections accepted, refused ones included
	Refused  int64 // connections reset at once (Refuse mode, or the target unreachable)
	Up, Down int64 // bytes forwarded client->server and server->client
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Up: p.up.Load(), Down: p.down.Load()}
}

// Close stops accepting, closes every connection and waits for the relays to end.
// It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if !already {
		_ = p.ln.Close()
		p.Cut()
		p.SetMode(Pass) // wake relays held in Blackhole so they see their closed sockets
	}
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if p.Mode() == Refuse {
			p.reset(c)
			continue
		}
		p.wg.Add(1)
		go p.relay(c)
	}
}

// reset closes c with an RST rather than a FIN, as a closed port answers.
func (p *Proxy) reset(c net.Conn) {
	p.refused.Add(1)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) relay(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()

	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.reset(client)
		return
	}
	if !l.attach(server) { // cut while dialling
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.copy(server, client, &p.up); done <- struct{}{} }()
	go func() { p.copy(client, server, &p.down); done <- struct{}{} }()
	<-done // one side ended: end both
	l.close()
	<-done
}

// copy relays src to dst chunk by chunk, honouring the mode and latency at each
// chunk, until either side fails.
func (p *Proxy) copy(dst, src net.Conn, count *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(src) {
				return
			}
			// Counted before the write: whatever the peer does in answer cannot be
			// seen before the bytes that caused it are counted.
			count.Add(int64(n))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			// Half-close: pass the FIN on so the other side sees the end of input.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// hold waits out the latency and any Blackhole period before a chunk is relayed. It
// returns false when the connection was closed meanwhile.
func (p *Proxy) hold(src net.Conn) bool {
	for {
		p.mu.Lock()
		mode, latency, changed, closed := p.mode, p.latency, p.changed, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if mode != Blackhole {
			if latency > 0 {
				time.Sleep(latency)
			}
			return true
		}
		// Wait for the mode to change; a Cut closes src, which a zero-byte deadline
		// probe cannot see, so poll for it at a modest rate.
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
			if isClosed(src) {
				return false
			}
		}
	}
}

// isClosed reports whether c was closed locally (by Cut): setting a deadline on a
// closed net.Conn fails.
func isClosed(c net.Conn) bool {
	return c.SetReadDeadline(time.Time{}) != nil
}
