package redisfailover

import (
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

func TestMain(m *testing.M) { os.Exit(child.Main(m)) }

// masterName is the name the Sentinel gives the primary.
const masterName = "dirgate"

// historyMetric counts the history changes an instance detected (docs/cache.md).
const historyMetric = "dirgate_redis_history_changes_total"

// historyLog is in the warning an instance logs when it detects one.
const historyLog = "redis: history changed"

// deployment is two dirgate instances (A and B) sharing one Redis deployment, in
// front of the harness DC, and a tokens-file token acting as the fixture's
// administrator: such a token never needs Redis, so no request made with it may fail
// whatever Redis does.
type deployment struct {
	dc   sambatest.DC
	a, b *child.Program
	tok  string
	c    *child.Client
}

// harnessDC returns the harness DC, seeded with the fixture; tests call it first,
// so that they skip (or fail under CI=true) before starting anything.
func harnessDC(t *testing.T) sambatest.DC {
	t.Helper()
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	return dc
}

// startDeployment starts the two instances in front of dc with env (the Redis
// settings) added to the settings every test here uses.
func startDeployment(t *testing.T, dc sambatest.DC, env map[string]string) *deployment {
	t.Helper()
	tok := child.NewToken(t, "redisfo-")
	all := map[string]string{
		"DIRGATE_SECRET_FILE": child.WriteFile(t, "secret", "the Redis failover tests' secret, 32 bytes or more\n"),
		// Retry Redis soon after a failure, so that the promoted primary is used
		// within the tests' few seconds of watching.
		"DIRGATE_REDIS_RETRY_INTERVAL": "250ms",
		"DIRGATE_DECISION_LOG":         "off",
	}
	for k, v := range env {
		all[k] = v
	}
	args := append(child.LDAPArgs(t, dc, dc.URL, child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN})),
		"--principal-ttl", "10m", "--request-timeout", "20s")
	d := &deployment{dc: dc, tok: tok, c: child.NewClient()}
	d.a = child.Start(t, all, args...)
	d.b = child.Start(t, all, args...)
	// The instances run with the race detector when the tests do: a race found in
	// them during a failover fails the test, with the report.
	t.Cleanup(func() {
		for _, name := range []string{"A", "B"} {
			p := d.instances()[name]
			err := p.Stop()
			_, stderr := p.Output(t)
			if i := bytes.Index(stderr, []byte("WARNING: DATA RACE")); i >= 0 {
				t.Errorf("instance %s (exit: %v) reported a data race:\n%s", name, err, stderr[i:min(len(stderr), i+6000)])
			}
			if t.Failed() {
				t.Logf("instance %s log (warnings, errors, Redis):\n%s", name, interesting(stderr))
			}
		}
	})
	return d
}

func (d *deployment) instances() map[string]*child.Program {
	return map[string]*child.Program{"A": d.a, "B": d.b}
}

// root is an instance's URL up to /api.
func root(p *child.Program) string {
	return strings.TrimSuffix(p.Base, "/api/directoryObjects/groupMembers")
}

// interesting keeps the log lines above info level and those about Redis, which
// are what explains a failure here.
func interesting(log []byte) string {
	var out []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) ||
			(strings.Contains(strings.ToLower(l), "redis") && !strings.Contains(l, `"msg":"http request"`)) {
			out = append(out, l)
		}
	}
	if len(out) > 60 {
		out = append(out[:30:30], append([]string{"…"}, out[len(out)-30:]...)...)
	}
	return strings.Join(out, "\n")
}

// sentinelRedis is a primary, its replica, and a Sentinel with fast timings that
// promotes the replica when the primary dies.
type sentinelRedis struct {
	primary, replica, sentinel *redistest.Server
}

func startSentinelRedis(t *testing.T) sentinelRedis {
	t.Helper()
	p := redistest.Start(t)
	r := redistest.StartReplica(t, p)
	s := redistest.StartSentinelWith(t, p, masterName, redistest.FastFailover)
	s.WaitSentinelReplicas(t, masterName, 1, 30*time.Second)
	return sentinelRedis{primary: p, replica: r, sentinel: s}
}

func (s sentinelRedis) env() map[string]string {
	return map[string]string{"DIRGATE_REDIS_MODE": "sentinel", "DIRGATE_REDIS_ADDR": s.sentinel.Addr(),
		"DIRGATE_REDIS_MASTER_NAME": masterName}
}

// awaitPromotion waits until the Sentinel has promoted the replica after the
// primary was killed, and returns the promoted replica's INFO replication.
func (s sentinelRedis) awaitPromotion(t *testing.T) redistest.Info {
	t.Helper()
	if got := s.sentinel.WaitNewPrimary(t, masterName, s.primary.Addr(), 60*time.Second); got != s.replica.Addr() {
		t.Fatalf("the Sentinel promoted %s, not the replica %s", got, s.replica.Addr())
	}
	return s.replica.WaitRole(t, "master", 30*time.Second)
}

// nestedPair creates two groups of the test's own: inner holding two fixture users,
// outer holding inner and a third user. Listing inner directly and outer with
// includeIndirect=true both show inner's members.
func nestedPair(t *testing.T, dc sambatest.DC, name string) (inner, outer string) {
	t.Helper()
	inner = child.TempGroup(t, dc, "rf "+name+" inner", fixture.RegularDN, fixture.NeverExpiresDN)
	outer = child.TempGroup(t, dc, "rf "+name+" outer", inner, fixture.DisabledDN)
	return inner, outer
}

// directoryDNs reads what the directory holds, as the administrator: the group's
// members, or with nested its members and, breadth first, those of every group
// among them (the groups themselves included, the group itself excluded, cycles
// ended), as docs/compatibility.md defines includeIndirect. Lower-cased and sorted.
// It follows only member, so it is the truth for groups that are nobody's primary
// group, such as the tests' own.
func directoryDNs(t *testing.T, dc sambatest.DC, group string, nested bool) []string {
	t.Helper()
	admin := dc.DialAdmin(t)
	seen := map[string]bool{strings.ToLower(group): true}
	var out []string
	queue := []string{group}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		res, err := admin.Search(goldap.NewSearchRequest(g, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
			0, 0, false, "(objectClass=*)", []string{"member"}, nil))
		if err != nil {
			t.Fatalf("read members of %s: %v", g, err)
		}
		for _, e := range res.Entries {
			for _, m := range e.GetAttributeValues("member") {
				if seen[strings.ToLower(m)] {
					continue
				}
				seen[strings.ToLower(m)] = true
				out = append(out, strings.ToLower(m))
				if nested && isGroup(t, admin, m) {
					queue = append(queue, m)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func isGroup(t *testing.T, admin *goldap.Conn, dn string) bool {
	t.Helper()
	res, err := admin.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=group)", []string{"1.1"}, nil))
	if err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
		t.Fatalf("read %s: %v", dn, err)
	}
	return err == nil && len(res.Entries) == 1
}

// normalized is a listing's DNs lower-cased and sorted, to compare with
// directoryDNs.
func normalized(dns []string) []string {
	out := make([]string, len(dns))
	for i, dn := range dns {
		out[i] = strings.ToLower(dn)
	}
	sort.Strings(out)
	return out
}

func hasDN(dns []string, dn string) bool {
	for _, d := range dns {
		if strings.EqualFold(d, dn) {
			return true
		}
	}
	return false
}

// checkHistoryChange checks that both instances report the failover: the
// counter of detected history changes is at least one, and the warning is logged.
// It waits a little, since an instance detects the change on its next connection.
func (d *deployment) checkHistoryChange(t *testing.T) {
	t.Helper()
	for _, name := range []string{"A", "B"} {
		p := d.instances()[name]
		var n float64
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; {
			var m map[string]float64
			m, err = p.Metrics(context.Background())
			n = 0
			for k, v := range m {
				if k == historyMetric || strings.HasPrefix(k, historyMetric+"{") {
					n += v
				}
			}
			if n >= 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if n < 1 {
			t.Errorf("instance %s: %s is %v after the failover (%v), want at least 1", name, historyMetric, n, err)
		}
		if _, stderr := p.Output(t); !bytes.Contains(stderr, []byte(historyLog)) {
			t.Errorf("instance %s logged no %q after the failover", name, historyLog)
		}
	}
}
