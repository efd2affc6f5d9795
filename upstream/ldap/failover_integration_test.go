package ldap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// TestIntegrationFailoverSilentDC: two "DCs" that are relays in front of the same
// real DC. When the first one stops delivering answers (a DC whose packets are
// dropped), listings, lookups, a removal, an addition and a sign-in keep working,
// each well within AttemptTimeout plus a normal answer, and the silent DC is marked
// down. When it answers again, a health check brings it back and it is preferred.
// The two-DC harness tests the same against two real, replicating DCs.
func TestIntegrationFailoverSilentDC(t *testing.T) {
	dc := sambatest.Env(t)
	target := strings.TrimPrefix(dc.URL, "ldaps://")
	p1, p2 := startProxy(t, target), startProxy(t, target)
	c := dcConfig(dc)
	c.URL = "ldaps://" + p1.addr() + " ldaps://" + p2.addr()
	c.AttemptTimeout, c.DialTimeout, c.HealthInterval = 300*time.Millisecond, 500*time.Millisecond, time.Hour
	d := openDC(t, c)
	group, alice := mustLookup(t, d, smokeGroup), mustLookup(t, d, smokeAlice)
	if _, err := d.Members(context.Background(), group, nil); err != nil {
		t.Fatal(err)
	}
	p1.stall.Store(true)
	ctx := context.Background()
	slowest := time.Duration(0)
	timed := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		if err := f(); err != nil {
			t.Errorf("%s with DC1 silent: %v", what, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	timed("listing", func() error { _, err := d.Members(ctx, group, nil); return err })
	timed("lookup", func() error { _, err := d.Lookup(ctx, dirgate.MustParseIdentifier(smokeSmith), nil); return err })
	timed("removal", func() error { return d.RemoveMember(ctx, group, alice) })
	timed("addition", func() error { return d.AddMember(ctx, group, alice) })
	timed("sign-in", func() error {
		_, err := d.CheckPassword(ctx, mustName(t, "smoke-alice@corp.example.com"), smokeAlicePw)
		return err
	})
	if slowest > 2*time.Second {
		t.Errorf("the slowest call took %v with DC1 silent (AttemptTimeout 300ms)", slowest)
	}
	t.Logf("slowest call with DC1 silent: %v", slowest.Round(time.Millisecond))
	if s := d.Servers(); s[0].Up || !s[1].Up {
		t.Errorf("servers %+v: want DC1 down, DC2 up", s)
	}
	p1.stall.Store(false)
	waitProbed(d.servers()[0]) // the check started when it was marked down
	d.probe(ctx, d.servers()[0])
	if s := d.Servers(); !s[0].Up {
		t.Fatalf("DC1 answers again but is still down: %+v", s[0])
	}
	before := p1.accepted.Load()
	d.servers()[0].pool.flushIdle()
	mustLookup(t, d, smokeAlice)
	if p1.accepted.Load() == before {
		t.Error("DC1 is up again but the next call did not go to it")
	}
}
