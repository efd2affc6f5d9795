package redistest

import (
	"strconv"
	"strings"
	"testing"
)

// TestServer checks what the cache tests rely on: a server that answers, holds data,
// loses it on Restart (no persistence) and answers again on the same port.
func TestServer(t *testing.T) {
	s := Start(t)
	if got, err := s.Do("SET", "k", "v"); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v; want OK", got, err)
	}
	if got, _ := s.Do("GET", "k"); got != "v" {
		t.Fatalf("GET = %q, want v", got)
	}
	port := s.Port()
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	s.Restart()
	if s.Port() != port {
		t.Errorf("Restart moved the server from port %d to %d", port, s.Port())
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "" {
		t.Errorf("GET after Restart = %q, %v; want nothing", got, err)
	}
}

// TestCluster checks that the three nodes share the slots: a key is answered by its
// owner and redirected by the others.
func TestCluster(t *testing.T) {
	c := StartCluster(t)
	owners, moved := 0, 0
	for _, n := range c.Nodes {
		_, err := n.Do("SET", "{k}", "v")
		switch {
		case err == nil:
			owners++
		case strings.HasPrefix(err.Error(), "MOVED"):
			moved++
		default:
			t.Errorf("SET on %s: %v", n.Addr(), err)
		}
	}
	if owners != 1 || moved != 2 {
		t.Errorf("owners=%d moved=%d, want 1 and 2", owners, moved)
	}
}

// TestTLS: a TLS server answers over TLS with the generated CA, and refuses plain text.
func TestTLS(t *testing.T) {
	s := StartTLS(t, NewTLSFiles(t))
	if got, err := s.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS = %q, %v", got, err)
	}
	if _, err := do(s.Addr(), nil, "PING"); err == nil {
		t.Error("plain-text PING to a TLS port succeeded")
	}
}

// TestSentinel: a Sentinel names the primary it monitors.
func TestSentinel(t *testing.T) {
	p := Start(t)
	s := StartSentinel(t, p, "mymaster")
	got, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
	if err != nil || got != "127.0.0.1\n"+strconv.Itoa(p.Port()) {
		t.Errorf("master address = %q, %v", got, err)
	}
}
