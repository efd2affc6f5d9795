package main

import (
	"io"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/upstream/ldap"
	"github.com/redis/go-redis/v9"
)

// TestWriteJournalInLDAPConfig: with Redis, the LDAP adapter is configured with the
// write journal in Redis, under the deployment's key prefix and sealed with its
// secret file, so that a write one replica records is read by another; the journal
// is there before the adapter is opened (openRedis comes first). Without Redis the
// adapter gets no journal at all: a nil interface, not a nil journal inside one.
func TestWriteJournalInLDAPConfig(t *testing.T) {
	srv := redistest.Start(t)
	args := append(withRedis(t, srv.Addr()), "--redis-key-prefix", "wj:")
	replica := func() ldap.WriteJournal {
		cfg, err := LoadConfig(append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...),
			func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMain(cfg, io.Discard, io.Discard)
		t.Cleanup(func() { m.Close() })
		if err := m.openRedis(); err != nil {
			t.Fatal(err)
		}
		lcfg, err := m.ldapConfig()
		if err != nil {
			t.Fatal(err)
		}
		if lcfg.Journal == nil {
			t.Fatal("the LDAP adapter is configured without a write journal while Redis is")
		}
		return lcfg.Journal
	}
	a, b := replica(), replica()
	w := dirgate.MembershipWrite{Group: "0a1b2c3d-0000-4000-a000-000000000001", Member: "0a1b2c3d-0000-4000-a000-0000000000aa",
		Server: "ldaps://dc1.corp.example.com:636", At: time.Now()}
	if err := a.Record(t.Context(), w, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := b.Recent(t.Context(), w.Group)
	if err != nil || len(got) != 1 || got[0].Member != w.Member {
		t.Fatalf("the other replica read %+v, %v; want the write", got, err)
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if n := rc.Exists(t.Context(), "wj:{"+w.Group+"}:w", "wj:{"+w.Group+"}:w:at").Val(); n != 2 {
		t.Errorf("%d of the write's two keys under the deployment's prefix", n)
	}

	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	defer m.Close()
	if err := m.openRedis(); err != nil {
		t.Fatal(err)
	}
	if lcfg, err := m.ldapConfig(); err != nil || lcfg.Journal != nil {
		t.Errorf("without Redis the LDAP adapter gets the journal %#v (%v), want none", lcfg.Journal, err)
	}
}
