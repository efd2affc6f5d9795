package redistest

import (
	"strconv"
	"testing"
	"time"
)

// TestParseInfo reads INFO's fields, skipping section headers and blank lines.
func TestParseInfo(t *testing.T) {
	i := parseInfo("# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=1,state=online\r\n" +
		"master_replid:abc\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nsecond_repl_offset:-1\r\n\r\n")
	if i["role"] != "master" || i.Int("connected_slaves") != 1 || i["slave0"] != "ip=127.0.0.1,port=1,state=online" {
		t.Errorf("parsed %v", i)
	}
	if i.Int("missing") != -1 || i.Int("role") != -1 {
		t.Errorf("Int of a missing or non-numeric field: %d %d", i.Int("missing"), i.Int("role"))
	}
	if _, ok := i.PromotedAt(); ok {
		t.Error("PromotedAt of a server never promoted reports a promotion")
	}
	p := Info{"master_replid2": "a1", "second_repl_offset": "1001"}
	if off, ok := p.PromotedAt(); !ok || off != 1000 {
		t.Errorf("PromotedAt = %d, %v; want 1000, true", off, ok)
	}
}

// TestReplicaPauseResume: a replica holds what its primary held; paused, it applies
// nothing new; resumed, it catches up.
func TestReplicaPauseResume(t *testing.T) {
	p := Start(t)
	if _, err := p.Do("SET", "before", "1"); err != nil {
		t.Fatal(err)
	}
	r := StartReplica(t, p)
	if got, _ := r.Do("GET", "before"); got != "1" {
		t.Errorf("replica GET before = %q, want 1", got)
	}
	pi, err := p.Info("replication")
	if err != nil || pi["role"] != "master" || pi.Int("connected_slaves") != 1 {
		t.Fatalf("primary's replication: %v %v", pi, err)
	}
	r.Pause()
	if _, err := p.Do("SET", "paused", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("PING"); err == nil {
		t.Error("a paused replica answered PING")
	}
	r.Resume()
	WaitReplicated(t, p, r, 10*time.Second)
	if got, _ := r.Do("GET", "paused"); got != "1" {
		t.Errorf("replica GET paused after resuming = %q, want 1", got)
	}
}

// TestSentinelFailover: the Sentinel, with fast timings, promotes the replica once
// the primary is killed. The promoted replica has a new replication ID and keeps
// the old primary's as its second.
func TestSentinelFailover(t *testing.T) {
	p := Start(t)
	r := StartReplica(t, p)
	s := StartSentinelWith(t, p, "mymaster", FastFailover)
	s.WaitSentinelReplicas(t, "mymaster", 1, 20*time.Second)
	old, err := p.Info("replication")
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	got := s.WaitNewPrimary(t, "mymaster", p.Addr(), 60*time.Second)
	if got != r.Addr() {
		t.Fatalf("the Sentinel gives %s, want the replica %s", got, r.Addr())
	}
	i := r.WaitRole(t, "master", 10*time.Second)
	if i["master_replid"] == old["master_replid"] || i["master_replid2"] != old["master_replid"] {
		t.Errorf("promoted: replid %s replid2 %s; the old primary's replid was %s", i["master_replid"], i["master_replid2"], old["master_replid"])
	}
	if _, ok := i.PromotedAt(); !ok {
		t.Errorf("PromotedAt of the promoted replica reports no promotion: %v", i)
	}
}

// TestLostWrite makes the lost write that failover tests need, deterministically: the
// replica is paused, the primary is filled beyond what the kernel buffers towards
// the replica, a marker is written, the primary is killed and the replica resumed
// and promoted. The marker is gone, and the promoted replica's offset is below the
// primary's before the marker.
func TestLostWrite(t *testing.T) {
	p := Start(t)
	r := StartReplica(t, p)
	s := StartSentinelWith(t, p, "mymaster", FastFailover)
	s.WaitSentinelReplicas(t, "mymaster", 1, 20*time.Second)
	if _, err := p.Do("SET", "kept", "1"); err != nil {
		t.Fatal(err)
	}
	WaitReplicated(t, p, r, 10*time.Second)
	r.Pause()
	if err := p.Fill("filler:", 40, 1<<20); err != nil {
		t.Fatal(err)
	}
	pi, err := p.Info("replication")
	if err != nil {
		t.Fatal(err)
	}
	before := pi.Int("master_repl_offset")
	if _, err := p.Do("SET", "lost", "1"); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	r.Resume()
	s.WaitNewPrimary(t, "mymaster", p.Addr(), 60*time.Second)
	i := r.WaitRole(t, "master", 10*time.Second)
	at, ok := i.PromotedAt()
	if !ok || at >= before {
		t.Errorf("promoted at offset %d (%v), want below %d: the writes were not lost", at, ok, before)
	}
	if got, _ := r.Do("GET", "lost"); got != "" {
		t.Errorf("the lost marker is on the promoted replica: %q", got)
	}
	if got, _ := r.Do("GET", "kept"); got != "1" {
		t.Errorf("the replicated key is not on the promoted replica: %q", got)
	}
	t.Logf("primary at %d before the lost write; the replica was promoted at %d (%d MiB lost)", before, at, (before-at)>>20)
}

// TestClusterFailover: in a cluster with a replica per primary, killing the primary
// that owns a key gets its replica promoted, and the key's slot served again.
func TestClusterFailover(t *testing.T) {
	c := StartClusterWithReplicas(t, time.Second)
	if got := len(c.Primaries()); got != 3 {
		t.Fatalf("%d primaries, want 3", got)
	}
	owner, err := c.Owner("{lease}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Do("SET", "{lease}", "v"); err != nil {
		t.Fatal(err)
	}
	r := c.ReplicaOf(owner)
	if r == nil {
		t.Fatalf("no replica of %s", owner.Addr())
	}
	WaitReplicated(t, owner, r, 10*time.Second)
	owner.Stop()
	c.WaitPromoted(t, r, 60*time.Second)
	now, err := c.Owner("{lease}")
	if err != nil || now != r {
		t.Fatalf("owner after the failover: %v %v, want %s", now, err, r.Addr())
	}
	if got, _ := r.Do("GET", "{lease}"); got != "v" {
		t.Errorf("GET on the promoted replica = %q, want v", got)
	}
	if got := strconv.Itoa(len(c.Primaries())); got != "3" {
		t.Errorf("%s primaries after the failover, want 3", got)
	}
}

// TestSentinelQuorum: three Sentinels with a quorum of two find each other, promote
// the replica when the primary is killed, and turn the old primary, started again
// (empty), into a replica of the promoted one, as the chaos suite (test/suite/chaos)
// relies on.
func TestSentinelQuorum(t *testing.T) {
	p := Start(t)
	r := StartReplica(t, p)
	opts := FastFailover
	opts.Quorum = 2
	var ss []*Server
	for range 3 {
		ss = append(ss, StartSentinelWith(t, p, "mymaster", opts))
	}
	for _, s := range ss {
		s.WaitSentinelPeers(t, "mymaster", 2, 30*time.Second)
		s.WaitSentinelReplicas(t, "mymaster", 1, 30*time.Second)
		if st, err := s.SentinelState("mymaster"); err != nil || st["quorum"] != "2" {
			t.Fatalf("Sentinel state %v, %v; want quorum 2", st, err)
		}
	}
	p.Stop()
	// Every Sentinel must know the new primary before the old one is back: one
	// still on the old configuration (the new one reaches it by the others' hello
	// messages, slowly on a loaded machine) would make the promoted replica a
	// replica of the returning, empty, old primary.
	for _, s := range ss {
		if got := s.WaitNewPrimary(t, "mymaster", p.Addr(), 60*time.Second); got != r.Addr() {
			t.Fatalf("the Sentinel on port %d promoted %s, not the replica %s", s.Port(), got, r.Addr())
		}
	}
	r.WaitRole(t, "master", 30*time.Second)
	p.Restart()
	p.WaitRole(t, "slave", 60*time.Second)
	p.WaitLinkUp(t, 30*time.Second)
	if i, _ := p.Info("replication"); i["master_port"] != strconv.Itoa(r.Port()) {
		t.Errorf("the old primary replicates port %s, want %d", i["master_port"], r.Port())
	}
}
