package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelOptions are a Sentinel's timings for the primary it monitors; zero keeps
// Sentinel's default.
type SentinelOptions struct {
	// DownAfter is down-after-milliseconds: how long the primary (or a replica) may
	// leave pings unanswered before the Sentinel holds it down. Default 30 s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout: how long a promotion may take before it is
	// abandoned, and half the pause before a failover is tried again (after one that
	// found no replica fit to promote, for instance). Default 3 min.
	FailoverTimeout time.Duration
	// Quorum is how many Sentinels must hold the primary down before a failover
	// starts; zero is one, for a Sentinel alone. With several Sentinels the one that
	// runs the failover also needs the votes of a majority of them.
	Quorum int
}

// quorum is the quorum of the monitor line.
func (o SentinelOptions) quorum() int { return max(o.Quorum, 1) }

// FastFailover are timings for tests: the primary is held down after a second of
// silence, and a failover that could not complete is tried again after 6 s.
var FastFailover = SentinelOptions{DownAfter: time.Second, FailoverTimeout: 3 * time.Second}

// config returns the options as sentinel.conf lines for the primary named name.
func (o SentinelOptions) config(name string) string {
	var b strings.Builder
	if o.DownAfter > 0 {
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", name, o.DownAfter.Milliseconds())
	}
	if o.FailoverTimeout > 0 {
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", name, o.FailoverTimeout.Milliseconds())
	}
	return b.String()
}

// StartSentinelWith starts a Sentinel that monitors primary under name, with the
// quorum and timings of o (FastFailover for failover tests). Sentinels started for
// one primary find each other through it (their hello messages on the primary's
// __sentinel__:hello channel); WaitSentinelPeers waits until they have.
func StartSentinelWith(t testing.TB, primary *Server, name string, o SentinelOptions) *Server {
	t.Helper()
	return newServer(t, "", nil, func(s *Server) {
		s.sentinel = name + " 127.0.0.1 " + strconv.Itoa(primary.port)
		s.sentOpts = o
	})
}

// SentinelPrimary returns the address ("127.0.0.1:port") the Sentinel gives for the
// primary named name: the one clients connect to.
func (s *Server) SentinelPrimary(name string) (string, error) {
	got, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", err
	}
	host, port, ok := strings.Cut(got, "\n")
	if !ok {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %q", name, got)
	}
	return host + ":" + port, nil
}

// SentinelState returns what the Sentinel knows of the primary named name (SENTINEL
// MASTER): "flags" (master, s_down, o_down, failover_in_progress), "num-slaves",
// "ip", "port", ….
func (s *Server) SentinelState(name string) (map[string]string, error) {
	got, err := s.Do("SENTINEL", "MASTER", name)
	if err != nil {
		return nil, err
	}
	f := strings.Split(got, "\n")
	out := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		out[f[i]] = f[i+1]
	}
	return out, nil
}

// WaitSentinelReplicas waits until the Sentinel knows at least n replicas of the
// primary named name: it learns of them from the primary's INFO, and can promote
// only a replica it knows.
func (s *Server) WaitSentinelReplicas(t testing.TB, name string, n int, limit time.Duration) {
	t.Helper()
	var last map[string]string
	var err error
	for deadline := time.Now().Add(limit); ; {
		last, err = s.SentinelState(name)
		if got, _ := strconv.Atoi(last["num-slaves"]); err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the Sentinel on port %d did not learn of %d replicas of %s within %v: %v %v", s.port, n, name, limit, err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitNewPrimary waits until the Sentinel gives an address other than old for the
// primary named name, which it does once it has promoted a replica, and returns the
// new address.
func (s *Server) WaitNewPrimary(t testing.TB, name, old string, limit time.Duration) string {
	t.Helper()
	var got string
	var err error
	for deadline := time.Now().Add(limit); ; {
		got, err = s.SentinelPrimary(name)
		if err == nil && got != old {
			return got
		}
		if time.Now().After(deadline) {
			state, _ := s.SentinelState(name)
			t.Fatalf("redistest: the Sentinel on port %d still gives %s for %s after %v (%v); state %v", s.port, got, name, limit, err, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitSentinelPeers waits until the Sentinel knows at least n other Sentinels
// monitoring the primary named name (num-other-sentinels): a failover needs the votes
// of a majority of the Sentinels it knows.
func (s *Server) WaitSentinelPeers(t testing.TB, name string, n int, limit time.Duration) {
	t.Helper()
	var last map[string]string
	var err error
	for deadline := time.Now().Add(limit); ; {
		last, err = s.SentinelState(name)
		if got, _ := strconv.Atoi(last["num-other-sentinels"]); err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the Sentinel on port %d did not learn of %d other Sentinels of %s within %v: %v %v", s.port, n, name, limit, err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
