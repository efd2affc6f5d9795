package faults

import (
	"context"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestChangeFeedAcrossDCOutage: the DC goes away as dirgate sees a restart (every
// connection cut, new ones refused), changes are made on the DC meanwhile by another
// tool, and the DC comes back. The change feed must pick up from its position and
// bring the cached listing up to date without a request having to miss: nothing made
// during the outage is lost (docs/cache.md, "Changes made in the directory").
func TestChangeFeedAcrossDCOutage(t *testing.T) {
	p, px, tok, dc := startBehindProxy(t, nil)
	group := child.TempGroup(t, dc, "dirgate faults feed", fixture.RegularDN, fixture.NeverExpiresDN)
	c := child.NewClient()
	ctx := context.Background()
	u := child.ListURL(p.Base, group, "")
	child.Eventually(t, 30*time.Second, "the listing is cached", func() (bool, string) {
		r := c.Do(ctx, "GET", u, tok)
		return r.Status == 200 && r.Cache() == "hit", r.String()
	})

	px.SetMode(faultproxy.Refuse)
	px.Cut()
	admin := dc.DialAdmin(t) // straight to the DC, not through the proxy
	mod := goldap.NewModifyRequest(group, nil)
	mod.Delete("member", []string{fixture.RegularDN})
	mod.Add("member", []string{fixture.DisabledDN})
	if err := admin.Modify(mod); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // several feed intervals fail meanwhile
	px.SetMode(faultproxy.Pass)

	took := child.Eventually(t, 30*time.Second, "the change made during the outage reaches the listing", func() (bool, string) {
		r := c.Do(ctx, "GET", u, tok)
		got := r.DNs()
		return r.Status == 200 && containsFold(got, fixture.DisabledDN) && !containsFold(got, fixture.RegularDN), r.Cache() + " " + r.String()
	})
	t.Logf("the listing followed the change %v after the DC came back", took.Round(time.Millisecond))
	if code, body, err := p.Ready(ctx); err != nil || code != 200 {
		t.Errorf("/readyz after the outage: %d %s %v", code, body, err)
	}
}
