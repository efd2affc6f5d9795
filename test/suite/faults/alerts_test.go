package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/promtest"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// alertTimeScale divides every duration of deploy/prometheus/alerts.yaml (`for:`
// and range windows) for the end-to-end run, so that a rule's `for: 1m` becomes 5 s
// and a [5m] window 25 s: the production rules' logic under a clock the test can
// wait out. Thresholds are not scaled: the change feed's 30 s bound is waited out.
const alertTimeScale = 12

var ruleDuration = regexp.MustCompile(`(for: |\[)(\d+)([smh])\b`)

// scaledRules returns the rules file with its durations divided by alertTimeScale.
func scaledRules(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}
	return ruleDuration.ReplaceAllStringFunc(string(data), func(m string) string {
		p := ruleDuration.FindStringSubmatch(m)
		n, _ := strconv.Atoi(p[2])
		d := time.Duration(n) * unit[p[3]] / alertTimeScale
		return p[1] + strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	})
}

// copyPolicy copies the repository's policy into a directory of the instance's own,
// where the test can break it.
func copyPolicy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"authz.rego", "data.json"} {
		data, err := os.ReadFile(filepath.Join("../../../rego", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// instance is one dirgate under test with the fault proxy in front of its DC.
type instance struct {
	p         *child.Program
	dc        *faultproxy.Proxy
	policyDir string
}

// target is the instance's metrics listener, which Prometheus scrapes.
func (in instance) target() string { return in.p.MetricsAddr }

// alertWatch reads the alerts of one rule.
type alertWatch struct {
	t    *testing.T
	prom *promtest.Server
}

// states returns the state of every alert named name, keyed by instance ("" for an
// alert without one).
func (w alertWatch) states(name string) map[string]string {
	alerts, err := w.prom.Alerts(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range alerts {
		if a.Labels["alertname"] == name {
			out[a.Labels["instance"]] = a.State
		}
	}
	return out
}

// timings are what the log reports per alert: from the fault to pending and to
// firing, and from the fault's end to no alert.
type timings struct {
	name                   string
	pending, firing, clear time.Duration
}

// faultCycle checks that name is quiet on instance, makes the fault, waits for the
// alert to be pending and then firing on instance ("" for any instance), ends the
// fault, and waits for the alert to clear.
func (w alertWatch) faultCycle(name, instance string, limit time.Duration, fault, end func()) timings {
	w.t.Helper()
	return w.faultCycleFrom(time.Time{}, name, instance, limit, fault, end)
}

// faultCycleFrom is faultCycle for a fault that began at start, before the call.
func (w alertWatch) faultCycleFrom(start time.Time, name, instance string, limit time.Duration, fault, end func()) timings {
	w.t.Helper()
	if st := w.states(name); instance == "" && len(st) > 0 || st[instance] != "" {
		w.t.Fatalf("%s is %v before its fault", name, st)
	}
	tm := timings{name: name}
	if start.IsZero() {
		start = time.Now()
	}
	fault()
	state := func() string {
		st := w.states(name)
		if instance != "" {
			return st[instance]
		}
		best := ""
		for _, s := range st {
			if s == "firing" || best == "" {
				best = s
			}
		}
		return best
	}
	child.Eventually(w.t, limit, name+" fires", func() (bool, string) {
		s := state()
		if s != "" && tm.pending == 0 {
			tm.pending = time.Since(start)
		}
		return s == "firing", fmt.Sprintf("%v", w.states(name))
	})
	tm.firing = time.Since(start)
	end()
	start = time.Now()
	child.Eventually(w.t, limit, name+" clears after the fault ends", func() (bool, string) {
		st := w.states(name)
		return len(st) == 0, fmt.Sprintf("%v", st)
	})
	tm.clear = time.Since(start)
	w.t.Logf("%s on %q: pending after %v, firing after %v; cleared %v after the fault ended",
		name, instance, tm.pending.Round(100*time.Millisecond), tm.firing.Round(100*time.Millisecond), tm.clear.Round(100*time.Millisecond))
	return tm
}

// dashboardQueries reads deploy/grafana/dashboard.json's queries, "title/refId" →
// expr, with Grafana's variables put in for this run.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../../../deploy/grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "10s", "$job", "dirgate", "$instance", ".*")
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = vars.Replace(tg.Expr)
		}
	}
	return out
}

// noDataHere are the dashboard queries this run gives no data, and why; any other
// must return data at some point of the run.
var noDataHere = map[string]string{
	"Policy loads/B":               "no candidate policy here",
	"Reloads/B":                    "no candidate policy here",
	"Candidate differences/A":      "no candidate policy here",
	"Candidate differences/B":      "no candidate policy here",
	"TLS certificate expires in/A": "served over plain HTTP here",
	"Lease wait (p99)/A":           "no removal or addition here",
}

// dashboardRun runs every dashboard query and remembers which returned data.
type dashboardRun struct {
	queries map[string]string
	mu      sync.Mutex
	data    map[string]bool
}

func (d *dashboardRun) run(t *testing.T, prom *promtest.Server, when string) {
	t.Helper()
	for k, q := range d.queries {
		res, err := prom.Query(context.Background(), q)
		if err != nil {
			t.Errorf("dashboard query %s (%s): %v\n%s", k, when, err, q)
			continue
		}
		if len(res) > 0 {
			d.mu.Lock()
			d.data[k] = true
			d.mu.Unlock()
		}
	}
}

// TestAlertsFireOnFaults runs two dirgate instances on the DC and one Redis, scraped
// by a real Prometheus (Debian's package) every second with deploy/prometheus's
// rules scaled down in time (alertTimeScale), under a light load of listings and
// refused sign-ins. For each fault — the DC stopped (both instances' proxies
// refuse), Redis stopped (its proxy refuses), a policy that does not load (a broken
// .rego in one instance's policy directory), the change feed stalled (the DC hangs
// while listings come from the cache) — the matching alert must become pending and firing through
// Prometheus's HTTP API, and clear after the fault ends. Every dashboard query runs
// against the same Prometheus during the faults without error, and each returns
// data unless noDataHere says why this run cannot give it any.
func TestAlertsFireOnFaults(t *testing.T) {
	began := time.Now()
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	rds := redistest.Start(t)
	rpx := faultproxy.Start(t, rds.Addr())
	tok := child.NewToken(t, "alerts-")
	tokens := child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN})
	env := map[string]string{"DIRGATE_REDIS_ADDR": rpx.Addr(), "DIRGATE_REDIS_RETRY_INTERVAL": "250ms",
		"DIRGATE_SECRET_FILE": child.WriteFile(t, "secret", "the alert tests' secret, 32 bytes or more\n")}
	var ins [2]instance
	for i := range ins {
		px, ldapURL := child.ProxyDC(t, dc)
		pol := copyPolicy(t)
		args := append(child.LDAPArgs(t, dc, ldapURL, tokens), breakerArgs...)
		args = append(args, "--principal-ttl", "10m", "--request-timeout", "20s", "--policy-dir", pol)
		ins[i] = instance{p: child.Start(t, env, args...), dc: px, policyDir: pol}
	}
	prom := promtest.Start(t, promtest.Config{Job: "dirgate", Targets: []string{ins[0].target(), ins[1].target()},
		Rules: []string{scaledRules(t)}})
	w := alertWatch{t: t, prom: prom}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// The load: cached and uncached listings on both instances, and refused
	// sign-ins from an address of their own (they end up throttled: 429).
	var loadWG sync.WaitGroup
	var cold atomic.Bool // whether the load includes listings never cached
	cold.Store(true)
	c := child.NewClient()
	loadWG.Add(2)
	go func() {
		defer loadWG.Done()
		Drive(ctx, 2, 0, func(ctx context.Context, i int) {
			p := ins[i%2].p
			extra := ""
			if i%4 == 0 && cold.Load() {
				extra = child.PropsFor(i/4 + 1) // never cached: reaches the DC
			}
			c.Do(ctx, "GET", child.ListURL(p.Base, Groups[i%len(Groups)], extra), tok)
			sleepCtx(ctx, 20*time.Millisecond)
		})
	}()
	guesser := child.ClientFrom("127.0.0.9")
	go func() {
		defer loadWG.Done()
		for i := 0; ctx.Err() == nil; i++ {
			p := ins[i%2].p
			root := strings.TrimSuffix(p.Base, "/api/directoryObjects/groupMembers")
			req, _ := newJSONRequest(ctx, root+"/api/authSessions/create", `{"username":"nobody@corp.example.com","password":"wrong"}`)
			guesser.Send(req)
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
	defer loadWG.Wait()
	defer stop()

	child.Eventually(t, 30*time.Second, "Prometheus scrapes both instances", func() (bool, string) {
		res, err := prom.Query(ctx, `sum(up{job="dirgate"})`)
		return err == nil && len(res) == 1 && res[0].Value[1] == "2", fmt.Sprintf("%v %v", res, err)
	})
	// A change made in the directory, for the change feed's panels.
	child.TempGroup(t, dc, "dirgate alerts feed", fixture.RegularDN)
	dash := &dashboardRun{queries: dashboardQueries(t), data: map[string]bool{}}
	var all []timings

	// The DC stopped, as both instances see it.
	all = append(all, w.faultCycle("DirgateDirectoryUnavailable", "", 60*time.Second, func() {
		for _, in := range ins {
			in.dc.SetMode(faultproxy.Refuse)
			in.dc.Cut()
		}
	}, func() {
		dash.run(t, prom, "the DC stopped")
		for _, in := range ins {
			in.dc.SetMode(faultproxy.Pass)
		}
	}))

	// Redis stopped.
	all = append(all, w.faultCycle("DirgateCacheBypassingRedis", "", 60*time.Second, func() {
		rpx.SetMode(faultproxy.Refuse)
		rpx.Cut()
	}, func() {
		dash.run(t, prom, "Redis stopped")
		// The feed's lease lives in Redis: nobody reads (docs/operations.md).
		if st := w.states("DirgateChangeFeedNoReader"); len(st) == 0 {
			t.Error("DirgateChangeFeedNoReader is neither pending nor firing while Redis is stopped")
		}
		rpx.SetMode(faultproxy.Pass)
	}))

	// The change feed stalled: the DC hangs for both instances (whichever reads
	// would hand over to the other if only its own DC hung), while listings are
	// served from the cache only, so that no breaker opens; meanwhile, a policy that
	// does not load on one instance.
	cold.Store(false)
	stallStart := time.Now()
	for _, in := range ins {
		in.dc.SetMode(faultproxy.Blackhole)
	}
	broken := filepath.Join(ins[1].policyDir, "broken.rego")
	all = append(all, w.faultCycle("DirgatePolicyBroken", ins[1].target(), 60*time.Second, func() {
		if err := os.WriteFile(broken, []byte("package dirgate.authz\n\nallow if {\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if err := os.Remove(broken); err != nil {
			t.Fatal(err)
		}
	}))
	all = append(all, w.faultCycleFrom(stallStart, "DirgateChangeFeedStalled", "", 90*time.Second, func() {}, func() {
		dash.run(t, prom, "the change feed stalled")
		for _, in := range ins {
			in.dc.SetMode(faultproxy.Pass)
		}
		cold.Store(true)
	}))
	dash.run(t, prom, "after the faults")

	health, err := prom.RuleHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range health {
		if h != "ok" {
			t.Errorf("rule %s: %s", name, h)
		}
	}
	var missing []string
	for k := range dash.queries {
		why, excused := noDataHere[k]
		switch {
		case !dash.data[k] && !excused:
			missing = append(missing, k)
		case dash.data[k] && excused && why != "":
			t.Errorf("dashboard query %s returned data, although noDataHere says %q: update noDataHere", k, why)
		}
	}
	slices.Sort(missing)
	for _, k := range missing {
		t.Errorf("dashboard query %s returned no data during the run: %s", k, dash.queries[k])
	}
	t.Logf("%d dashboard queries, each run 4 times; %d returned data", len(dash.queries), len(dash.data))
	for _, tm := range all {
		t.Logf("%-28s pending %6v  firing %6v  cleared %6v", tm.name, tm.pending.Round(100*time.Millisecond),
			tm.firing.Round(100*time.Millisecond), tm.clear.Round(100*time.Millisecond))
	}
	t.Logf("alert end-to-end run: %v in all (rules' durations divided by %d)", time.Since(began).Round(time.Second), alertTimeScale)
}

func newJSONRequest(ctx context.Context, u, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
