package redisconn

import (
	"context"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
)

// TestHistoryNoticesPromotion runs real servers: a primary and its replica. A
// History that has seen the primary notices the replica's promotion on the first
// connection to it (before any command of that connection), once; a primary met for
// the first time, a replica, and a primary restarted empty are not changes.
func TestHistoryNoticesPromotion(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)

	h := NewHistory(nil)
	changed := h.Subscribe()
	ping := func(addr string) {
		t.Helper()
		c, err := Config{Addrs: []string{addr}, History: h}.Open(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ping(primary.Addr())
	ping(replica.Addr()) // a replica is not a primary: nothing learnt
	if g := h.Gen(); g != 0 {
		t.Fatalf("first contacts: Gen = %d, want 0", g)
	}

	if _, err := replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	ping(replica.Addr())
	if g := h.Gen(); g != 1 {
		t.Fatalf("after the promotion: Gen = %d, want 1", g)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the subscriber was not told")
	}
	ping(replica.Addr()) // the same history again
	if g := h.Gen(); g != 1 {
		t.Fatalf("a second connection to the promoted replica: Gen = %d, want 1", g)
	}

	// A primary restarted without its data starts a history of its own: the keys it
	// lost are missing, not older, which the cache's random tokens cover.
	primary.Stop()
	primary.Restart()
	ping(primary.Addr())
	if g := h.Gen(); g != 1 {
		t.Fatalf("a primary restarted empty: Gen = %d, want 1", g)
	}
}

// TestParseReplication reads the fields observe needs from INFO's text.
func TestParseReplication(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n" +
		"slave0:ip=127.0.0.1,port=1,state=online,offset=42,lag=0\r\n" +
		"master_replid:aaaa\r\nmaster_replid2:bbbb\r\nmaster_repl_offset:42\r\n"
	got := parseReplication(info)
	if got != (replication{role: "master", replID: "aaaa", replID2: "bbbb"}) {
		t.Fatalf("parseReplication = %+v", got)
	}
	if got := parseReplication("garbage\nrole\n:x"); got != (replication{}) {
		t.Fatalf("parseReplication(garbage) = %+v", got)
	}
}
