package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartReplica starts a server that replicates primary (--replicaof) and waits until
// its link to the primary is up and it holds everything the primary held when it
// synchronised. extra are further redis-server arguments.
func StartReplica(t testing.TB, primary *Server, extra ...string) *Server {
	t.Helper()
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}, extra...)
	r := newServer(t, "", args, nil)
	r.WaitLinkUp(t, startTimeout)
	return r
}

// WaitLinkUp waits until the server, a replica, reports its link to its primary up
// (master_link_status:up): the initial synchronisation is done.
func (s *Server) WaitLinkUp(t testing.TB, limit time.Duration) {
	t.Helper()
	s.waitInfo(t, limit, "replication", "the link to its primary up", func(i Info) bool {
		return i["role"] == "slave" && i["master_link_status"] == "up"
	})
}

// Pause stops the server with SIGSTOP: it keeps its connections but reads, answers
// and replicates nothing, while the kernel still buffers what is sent to it.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatalf("redistest: %v to the stopped server on port %d", sig, s.port)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v to the server on port %d: %v", sig, s.port, err)
	}
}

// Info is one section of INFO, field by field ("role" → "master").
type Info map[string]string

// Int returns a numeric field, or -1 when it is missing or not a number.
func (i Info) Int(field string) int64 {
	n, err := strconv.ParseInt(i[field], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// Info reads a section of INFO ("replication", "server"; "" for the default
// sections) into a map. Among the replication fields: role (master or slave),
// master_replid and master_replid2 (the replication IDs: a promoted replica has a
// new one and keeps its old primary's as the second), master_repl_offset,
// second_repl_offset (the offset up to which the second ID is valid: the promoted
// replica's offset when it was promoted, plus one), connected_slaves,
// master_link_status.
func (s *Server) Info(section string) (Info, error) {
	args := []string{"INFO"}
	if section != "" {
		args = append(args, section)
	}
	text, err := s.Do(args...)
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

// parseInfo reads INFO's "field:value" lines; section headers ("# Replication") and
// blank lines are skipped.
func parseInfo(text string) Info {
	out := Info{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// PromotedAt returns, for a replica that was promoted, the replication offset it had
// reached when it was promoted: what it holds of its old primary's history. ok is
// false when the server has no second replication ID (it was never promoted).
func (i Info) PromotedAt() (offset int64, ok bool) {
	second := i.Int("second_repl_offset")
	if second <= 0 || strings.Trim(i["master_replid2"], "0") == "" {
		return 0, false
	}
	return second - 1, true
}

// WaitReplicated waits until replica's replication offset has reached the offset
// primary has now: everything written to primary before the call is on replica.
func WaitReplicated(t testing.TB, primary, replica *Server, limit time.Duration) {
	t.Helper()
	pi, err := primary.Info("replication")
	if err != nil {
		t.Fatalf("redistest: INFO of the primary: %v", err)
	}
	want := pi.Int("master_repl_offset")
	replica.waitInfo(t, limit, "replication", fmt.Sprintf("replication offset %d", want), func(i Info) bool {
		return i.Int("master_repl_offset") >= want
	})
}

// Fill writes n values of size bytes under keys prefix0, prefix1, … and returns
// the first error. Written to a primary whose replica is paused, it makes the
// primary hold what it cannot send: the kernel buffers only a few MiB per
// connection, and the rest waits in the primary's output buffer for that replica,
// to be lost if the primary dies. (A replica's output buffer limit is 256 MiB, or
// 64 MiB for a minute, by default: stay below it.)
func (s *Server) Fill(prefix string, n, size int) error {
	value := strings.Repeat("x", size)
	for i := range n {
		if _, err := s.Do("SET", prefix+strconv.Itoa(i), value); err != nil {
			return fmt.Errorf("fill %s%d: %w", prefix, i, err)
		}
	}
	return nil
}

// WaitRole waits until the server reports role (master or slave) in INFO
// replication.
func (s *Server) WaitRole(t testing.TB, role string, limit time.Duration) Info {
	t.Helper()
	return s.waitInfo(t, limit, "replication", "role "+role, func(i Info) bool { return i["role"] == role })
}

// waitInfo polls INFO section every 20 ms until cond holds, and fails the test with
// the last reading when it does not within limit.
func (s *Server) waitInfo(t testing.TB, limit time.Duration, section, what string, cond func(Info) bool) Info {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last Info
	var lastErr error
	for {
		i, err := s.Info(section)
		if err == nil && cond(i) {
			return i
		}
		if err != nil {
			lastErr = err
		} else {
			last, lastErr = i, nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the server on port %d did not report %s within %v: %v %v", s.port, what, limit, lastErr, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
