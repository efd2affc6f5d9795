package ldap

// Integration tests against the two replicating Samba AD DCs of test/harness/samba/pair.sh
// (test/harness/samba/README.md, "Two replicating DCs"). They skip without the pair,
// unless CI is true, and hold it for their duration (sambatest.PairFromEnv).
//
// The conformance suite (TestConformance) needs the large fixture, which the pair
// is not seeded with (smoke objects only), so the two-DC configuration runs the
// smoke-level checks of TestIntegrationLookup, TestIntegrationMembers,
// TestIntegrationRemove and the sign-in through the adapter opened with both DCs'
// URLs, once with both DCs up and once with the preferred DC's packets dropped.

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// pairConfig is the adapter's configuration for both DCs of the pair, DC1 first.
func pairConfig(p sambatest.Pair) Config {
	return Config{
		URL: p.URL(1) + " " + p.URL(2), BindDN: p.BindDN, PasswordFile: os.Getenv(sambatest.VarPairPasswordFile),
		BaseDN: p.BaseDN, CAFile: p.CAFile,
	}
}

// TestPairSmoke runs the smoke-level checks against the adapter configured with
// both DCs: with both up, then with DC1's link down (every packet dropped), when
// each call must fail over to DC2 within the attempt timeout.
func TestPairSmoke(t *testing.T) {
	p := sambatest.PairFromEnv(t)
	d := openDC(t, pairConfig(p))
	t.Run("both up", func(t *testing.T) { pairSmokeChecks(t, p, d, 1) })
	t.Run("DC1 link down", func(t *testing.T) {
		p.LinkDown(t, 1)
		start := time.Now()
		pairSmokeChecks(t, p, d, 2)
		t.Logf("smoke checks with DC1's packets dropped took %v", time.Since(start).Round(time.Millisecond))
		if s := d.Servers(); s[0].Up || !s[1].Up {
			t.Errorf("servers %+v: want DC1 down, DC2 up", s)
		}
	})
}

// pairSmokeChecks are the smoke checks of integration_test.go and
// signin_integration_test.go, against d. Writes go to smoke-removable and are
// undone as the administrator on the DC that is up (writer, 1 or 2).
func pairSmokeChecks(t *testing.T, p sambatest.Pair, d *Directory, writer int) {
	ctx := context.Background()
	for _, id := range []string{smokeAlice, smokeSmith, smokeQuoted, smokeHash, smokeNested, smokeContact, smokePC} {
		o := mustLookup(t, d, id)
		if dirgate.MustParseDN(o.DN).Key() != dirgate.MustParseDN(id).Key() || o.GUID == "" {
			t.Errorf("lookup %s: %+v", id, o)
		}
		if byGUID := mustLookup(t, d, o.GUID); byGUID.DN != o.DN {
			t.Errorf("lookup of %s by GUID: %s", id, byGUID.DN)
		}
	}
	for _, tt := range []struct {
		group string
		want  []string
	}{
		{smokeGroup, dnKeys(smokeAlice, smokeSmith, smokeQuoted, smokeHash, smokeContact, smokePC, smokeNested, fspDN)},
		{smokePrimary, dnKeys(smokeAlice)},
	} {
		got, err := d.Members(ctx, mustLookup(t, d, tt.group), []string{"samaccountname"})
		if err != nil || !slices.Equal(keys(got), tt.want) {
			t.Errorf("members of %s = %v, %v; want %v", tt.group, keys(got), err, tt.want)
		}
	}
	groups, err := d.MemberOf(ctx, mustLookup(t, d, smokeAlice))
	if err != nil || !slices.Equal(keys(groups), dnKeys(smokeGroup, smokePrimary, "CN=Domain Users,CN=Users,"+p.BaseDN)) {
		t.Errorf("MemberOf(alice) = %v, %v", keys(groups), err)
	}

	group, smith := mustLookup(t, d, smokeRemovable), mustLookup(t, d, smokeSmith)
	t.Cleanup(func() { addMember(t, p.DC(writer), smokeRemovable, smokeSmith) })
	if err := d.RemoveMember(ctx, group, smith); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if ms, err := d.Members(ctx, group, nil); err != nil || !slices.Equal(keys(ms), dnKeys(smokeQuoted)) {
		t.Errorf("after removal: %v, %v", keys(ms), err)
	}
	if err := d.RemoveMember(ctx, group, smith); !errors.Is(err, dirgate.ErrNotMember) {
		t.Errorf("second removal: %v, want ErrNotMember", err)
	}
	if err := d.AddMember(ctx, group, smith); err != nil {
		t.Fatalf("add: %v", err)
	}
	if ms, err := d.Members(ctx, group, nil); err != nil || !slices.Equal(keys(ms), dnKeys(smokeSmith, smokeQuoted)) {
		t.Errorf("after addition: %v, %v", keys(ms), err)
	}
	if err := d.RemoveMember(ctx, mustLookup(t, d, smokePrimary), mustLookup(t, d, smokeAlice)); !errors.Is(err, dirgate.ErrPrimaryGroup) {
		t.Errorf("primary group removal: %v, want ErrPrimaryGroup", err)
	}

	if _, err := d.CheckPassword(ctx, mustName(t, "smoke-alice@corp.example.com"), smokeAlicePw); err != nil {
		t.Errorf("sign-in as smoke-alice: %v", err)
	}
	// A refusal is an answer. smoke-locked, which smoke-post.json locks out, takes
	// the wrong password: another bad count costs no account the tests sign in as.
	if _, err := d.CheckPassword(ctx, mustName(t, "smoke-locked@corp.example.com"), "Not-The-Password-1"); reasonOf(err) == "" {
		t.Errorf("sign-in as smoke-locked with a wrong password: %v, want a refusal", err)
	}
}

// TestPairSRVDiscovery opens the adapter with Domain and Site and no
// URL, its resolver pointed at the pair's DNS (Samba's internal DNS, which serves
// both DCs' locator records and their addresses). dirgate itself uses the system resolver, which
// cannot be pointed at the pair per process; Config.Resolver is the adapter's own
// seam for it. Both DCs must be discovered (StartTLS on port 389, each verified
// against its record's target name), listings must work, and with the first DC's
// packets dropped they must keep working from the other.
func TestPairSRVDiscovery(t *testing.T) {
	p := sambatest.PairFromEnv(t)
	c := pairConfig(p)
	// Both DCs serve the zone (Samba's internal DNS, port 53 of each). The resolver
	// asks DC1's, then, once a DC's packets are dropped, the other DC's: a real
	// client lists several DNS servers, and this test is about dirgate's discovery
	// and failover, not the resolver's (which waits seconds for a silent server).
	var dnsDC atomic.Int32
	dnsDC.Store(1)
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, network, net.JoinHostPort(p.Host(int(dnsDC.Load())), "53"))
	}}
	c.URL, c.Domain, c.Site, c.Resolver = "", p.Domain, p.Site, res
	d := openDC(t, c)
	servers := d.Servers()
	var hosts []string
	for _, s := range servers {
		u, err := url.Parse(s.URL)
		if err != nil || u.Scheme != "ldap" || u.Port() != "389" {
			t.Errorf("discovered %q: want ldap://<DC name>:389 (StartTLS)", s.URL)
			continue
		}
		hosts = append(hosts, u.Hostname())
	}
	want := []string{strings.ToLower(p.Names[0]), strings.ToLower(p.Names[1])}
	if slices.Sort(hosts); !slices.Equal(hosts, want) {
		t.Fatalf("discovered %v, want %v", hosts, want)
	}
	group := mustLookup(t, d, smokeGroup)
	if _, err := d.Members(context.Background(), group, nil); err != nil {
		t.Fatalf("listing through the discovered DCs: %v", err)
	}

	first := 1
	if strings.Contains(servers[0].URL, p.Names[1]) {
		first = 2
	}
	dnsDC.Store(int32(3 - first))
	p.LinkDown(t, first)
	start := time.Now()
	got, err := d.Members(context.Background(), group, nil)
	took := time.Since(start)
	if err != nil || len(got) == 0 {
		t.Fatalf("listing with DC%d (first discovered) silent: %d members, %v", first, len(got), err)
	}
	t.Logf("discovered %v; with DC%d's packets dropped a listing took %v", hosts, first, took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("listing with the first discovered DC silent took %v, over 5 s", took)
	}
	// The silent DC is checked at once and marked down when the check's dial times
	// out (DialTimeout, 2 s).
	deadline := time.Now().Add(10 * time.Second)
	for d.Servers()[0].Up && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if s := d.Servers(); s[0].Up || !s[1].Up {
		t.Errorf("servers %+v: want the first discovered down, the other up", s)
	}
}
