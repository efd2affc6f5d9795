package ldap

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP relay on 127.0.0.1 between the adapter and the DC that a test can
// break on purpose: drop the next request, drop the next response (after the server
// has acted on the request), or stop delivering answers altogether.
type proxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int32

	mu    sync.Mutex
	conns []net.Conn

	dropRequest  atomic.Bool // close the connection instead of forwarding the next client data
	dropResponse atomic.Bool // forward the next client data, swallow the answer, close
	stall        atomic.Bool // swallow everything the server sends
	armed        atomic.Bool // set by dropResponse once a request went through
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		closeBoth := func() { _ = client.Close(); _ = server.Close() }
		go func() { // client -> server
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if err != nil {
					closeBoth()
					return
				}
				if p.dropRequest.CompareAndSwap(true, false) {
					closeBoth()
					return
				}
				if p.dropResponse.CompareAndSwap(true, false) {
					p.armed.Store(true)
				}
				if _, err := server.Write(buf[:n]); err != nil {
					closeBoth()
					return
				}
			}
		}()
		go func() { // server -> client
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if err != nil {
					closeBoth()
					return
				}
				if p.armed.CompareAndSwap(true, false) {
					closeBoth()
					return
				}
				if p.stall.Load() {
					continue
				}
				if _, err := client.Write(buf[:n]); err != nil {
					closeBoth()
					return
				}
			}
		}()
	}
}
