package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// startEcho runs a line echo server on loopback: each line read is written back.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
}

// waitLive polls until the proxy holds want connections: closing is asynchronous.
func waitLive(t *testing.T, p *Proxy, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Live() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Live() = %d, want %d", p.Live(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRefused polls until the proxy has refused want connections: the client can
// see the reset before the proxy's counter moves.
func waitRefused(t *testing.T, p *Proxy, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Refused < want {
		if time.Now().After(deadline) {
			t.Fatalf("Refused = %d, want %d", p.Stats().Refused, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPassRelaysAndCounts(t *testing.T) {
	p := Start(t, startEcho(t))
	c, r := dial(t, p)
	roundTrip(t, c, r, "hello")
	waitLive(t, p, 1)
	// The counters are read from another goroutine: poll rather than assume an order.
	deadline := time.Now().Add(10 * time.Second)
	for st := p.Stats(); st.Accepted != 1 || st.Up != 6 || st.Down != 6 || st.Refused != 0; st = p.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want 1 accepted, 6 bytes each way", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Close()
	waitLive(t, p, 0) // the client's close ends the relay: nothing is held
}

// Refuse must look like a dead server to new clients, while open connections live
// on until Cut.
func TestRefuseResetsNewConnections(t *testing.T) {
	p := Start(t, startEcho(t))
	old, oldR := dial(t, p)
	roundTrip(t, old, oldR, "before")
	p.SetMode(Refuse)
	// The kernel completes the handshake and the proxy then resets: the reset reaches
	// the client during connect or on its first read.
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c.Close()
		io.WriteString(c, "x\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read on a refused connection: %v, want a reset or EOF", err)
		}
	}
	waitRefused(t, p, 1)
	if p.Stats().Refused != 1 {
		t.Fatalf("Refused = %d, want 1", p.Stats().Refused)
	}
	roundTrip(t, old, oldR, "still open")
	if n := p.Cut(); n != 1 {
		t.Fatalf("Cut closed %d connections, want 1", n)
	}
	waitLive(t, p, 0)
	p.SetMode(Pass)
	c, r := dial(t, p)
	roundTrip(t, c, r, "after")
}

// Blackhole holds bytes without losing them: after the mode changes they arrive.
func TestBlackholeHoldsThenDelivers(t *testing.T) {
	p := Start(t, startEcho(t))
	c, r := dial(t, p)
	roundTrip(t, c, r, "warm")
	p.SetMode(Blackhole)
	io.WriteString(c, "held\n")
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a blackhole: %v, want a timeout", err)
	}
	p.SetMode(Pass)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after the blackhole: %q %v, want the held line", got, err)
	}
}

// A connection held in Blackhole must still be released by Cut, or tests that
// count connections would see the proxy's own leak.
func TestCutReleasesBlackholedConnections(t *testing.T) {
	p := Start(t, startEcho(t))
	for range 3 {
		c, r := dial(t, p)
		roundTrip(t, c, r, "x")
	}
	p.SetMode(Blackhole)
	c, _ := dial(t, p)
	io.WriteString(c, "stuck\n")
	waitLive(t, p, 4)
	if n := p.Cut(); n != 4 {
		t.Fatalf("Cut closed %d, want 4", n)
	}
	waitLive(t, p, 0)
}

func TestLatencyDelaysEachChunk(t *testing.T) {
	p := Start(t, startEcho(t))
	c, r := dial(t, p)
	roundTrip(t, c, r, "warm")
	const d = 100 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	roundTrip(t, c, r, "slow")
	// A lower bound only: the request and the answer each waited d. Upper bounds
	// would depend on the machine's load.
	if el := time.Since(start); el < 2*d {
		t.Fatalf("round trip took %v, want at least %v", el, 2*d)
	}
}

// The target must be loopback: tests never send traffic elsewhere.
func TestNewRefusesNonLoopbackTargets(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		wantErr      bool
	}{
		{name: "ipv4 loopback", target: "127.0.0.1:1", wantErr: false},
		{name: "ipv6 loopback", target: "[::1]:1", wantErr: false},
		{name: "localhost", target: "localhost:1", wantErr: false},
		{name: "public address", target: "192.0.2.1:636", wantErr: true},
		{name: "host name", target: "dc.corp.example.com:636", wantErr: true},
		{name: "no port", target: "127.0.0.1", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.target)
			if p != nil {
				p.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("New(%q) error %v, want error %v", tc.target, err, tc.wantErr)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	got := strings.Join([]string{Pass.String(), Refuse.String(), Blackhole.String(), Mode(9).String()}, ",")
	if want := "pass,refuse,blackhole,mode(9)"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
