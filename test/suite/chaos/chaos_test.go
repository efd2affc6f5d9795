package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	"github.com/dirgate/dirgate/test/suite/chaos/history"
)

func TestMain(m *testing.M) { os.Exit(child.Main(m)) }

// fixedSeed is the seed of the run that is the same every time.
const fixedSeed = 20261128

// Settings of a run, from the environment (doc.go).
const (
	envDuration = "DIRGATE_CHAOS_DURATION"
	envMode     = "DIRGATE_CHAOS_MODE"
	envSeed     = "DIRGATE_CHAOS_SEED"
	envOut      = "DIRGATE_CHAOS_OUT"
	envFaults   = "DIRGATE_CHAOS_FAULTS"
)

// quiet is how long the run waits, every fault healed and the DCs replicated,
// before its final listings.
const quiet = 10 * time.Second

// TestChaos runs the workload under the nemesis and checks the history: with
// DIRGATE_CHAOS_SEED, one run of that seed ("replay"); otherwise a run of a fixed
// seed and one of a random seed.
func TestChaos(t *testing.T) {
	dur := 30 * time.Second
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("%s=%q: want a duration of at least 10s", envDuration, v)
		}
		dur = d
	}
	mode := quorumMode
	if v := os.Getenv(envMode); v != "" {
		if v != quorumMode && v != outageMode {
			t.Fatalf("%s=%q: want %s or %s", envMode, v, quorumMode, outageMode)
		}
		mode = v
	}
	menu := faultMenu
	if v := os.Getenv(envFaults); v != "" {
		var err error
		if menu, err = parseMenu(v); err != nil {
			t.Fatalf("%s=%q: %v", envFaults, v, err)
		}
	}
	if v := os.Getenv(envSeed); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", envSeed, v)
		}
		t.Run("replay", func(t *testing.T) { runChaos(t, "p", seed, dur, mode, menu) })
		return
	}
	t.Run("fixed", func(t *testing.T) { runChaos(t, "f", fixedSeed, dur, mode, menu) })
	t.Run("random", func(t *testing.T) { runChaos(t, "r", rand.Uint64()%1e12, dur, mode, menu) })
}

// runChaos is one run: deployment, fixture, schedule, workload and nemesis side by
// side, heal and quiet, final listings, history written and checked.
func runChaos(t *testing.T, run string, seed uint64, dur time.Duration, mode string, menu []string) {
	replay := fmt.Sprintf("%s=%d %s=%v %s=%s", envSeed, seed, envDuration, dur, envMode, mode)
	if !slices.Equal(menu, faultMenu) {
		replay += fmt.Sprintf(" %s=%s", envFaults, strings.Join(menu, ","))
	}
	t.Logf("seed %d (replay: %s)", seed, replay)
	pair := sambatest.PairFromEnv(t)
	setupStart := time.Now()
	f := newFixture(t, pair, run)
	callers := []string{child.NewToken(t, "chaos-"), child.NewToken(t, "chaos-")}
	tokens := map[string]string{callers[0]: f.Callers[0].DN, callers[1]: f.Callers[1].DN}
	var trustees []string
	for _, a := range append(append([]account(nil), f.Users...), f.Callers...) {
		trustees = append(trustees, a.DN)
	}
	d := startDeployment(t, pair, f.OU, trustees, tokens)
	sched := newSchedule(seed, dur, mode, menu)
	t.Logf("setup took %v; %d faults scheduled", time.Since(setupStart).Round(time.Millisecond), len(sched.Faults))

	rec := &recorder{}
	w := &workload{d: d, f: f, rec: rec, c: newHTTPClient(), callers: callers, tokens: map[int]string{}}
	out := outDir(t, seed)
	// The history is written whatever happens to the run, a failure included.
	t.Cleanup(func() {
		path := filepath.Join(out, "history.jsonl")
		file, err := os.Create(path)
		if err == nil {
			err = history.Write(file, rec.history())
			if cerr := file.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("write the history: %v", err)
			return
		}
		d.writeLogs(out)
		t.Logf("history: %s (seed %d; replica logs beside it)", path, seed)
	})

	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, steps := range sched.Steps {
		wg.Go(func() { w.run(ctx, start, steps) })
	}
	(&nemesis{t: t, d: d, rec: rec, mode: mode}).run(ctx, start, sched.Faults)
	wg.Wait()
	t.Logf("workload and nemesis done after %v", time.Since(start).Round(time.Millisecond))

	// Quiet: every fault is healed; the DCs exchange what they hold, and the
	// change feed and the caches catch up.
	pair.Replicate(t)
	time.Sleep(quiet)
	w.finalListings(ctx)

	ops := rec.history()
	summarize(t, ops)
	rep := history.Check(ops, checkConfig(f))
	t.Logf("checks: %v; staleness of direct changes %v, outside DC faults %v (by the DC changed: %v)", rep.Checks, rep.Staleness, rep.StalenessCalm, rep.StalenessCalmByDC)
	writeJSON(t, filepath.Join(out, "initial.json"), f.Initial)
	writeJSON(t, filepath.Join(out, "report.json"), rep)
	if len(rep.Anomalies) > 0 {
		plot := filepath.Join(out, "timeline.png")
		if err := history.Plot(ops, rep, plot); err != nil {
			t.Errorf("plot the timeline: %v", err)
		}
		c := checkConfig(f)
		t.Logf("timeline: %s; judge again with: go run ./test/suite/chaos/cmd/chaoscheck -staleness %v -converge %v -settle %v -disable-bound %v -max-request %v -initial %s %s",
			plot, c.Staleness, c.Converge, c.Settle, c.DisableBound, c.MaxRequest, filepath.Join(out, "initial.json"), filepath.Join(out, "history.jsonl"))
	}
	for _, a := range rep.Anomalies {
		t.Errorf("anomaly %s at op %d (causes %v): %s", a.Kind, a.Op, a.Causes, a.Detail)
	}
	w.compareWithDC(t)
}

// staleness is S: a direct change reaches every listing within S of calm, and it is
// Converge too: two writes on different DCs are ordered by real time once the first
// had that long to replicate. The pair's DCs pull each other's changes when notified,
// and every 10 s besides (dreplsrv:periodic_interval, test/harness/samba/pair.sh); a change
// made while the other DC was cut off waits for that pull once the link is back, and
// until it arrives AD settles the two by version, not by time: a removal through
// dirgate on one DC lost to an older addition stranded on the other that way.
const staleness = 12 * time.Second

// checkConfig is what the checker assumes of a run (docs/chaos.md).
func checkConfig(f *fixture) history.Config {
	return history.Config{Initial: f.Initial, Staleness: staleness,
		Converge: staleness, DisableBound: principalTTL + 5*time.Second, Settle: 3 * time.Second,
		MaxRequest: requestTimeout}
}

// writeJSON writes v to path, indented.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("write %s: %v", path, err)
	}
}

// outDir is DIRGATE_CHAOS_OUT/seed-<seed>, or a directory named by the seed under
// the system's temporary directory; it is kept after the test.
func outDir(t *testing.T, seed uint64) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("dirgate-chaos-%d", seed))
	if v := os.Getenv(envOut); v != "" {
		dir = filepath.Join(v, fmt.Sprintf("seed-%d", seed))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("history directory: %v", err)
	}
	return dir
}

// finalListings lists every group, directly and nested, on each replica, as the
// last operations of the history: the state the run ended in is checked too.
func (w *workload) finalListings(ctx context.Context) {
	for _, name := range replicaNames {
		for _, g := range w.f.Groups {
			for _, nested := range []bool{false, true} {
				w.api(ctx, history.Op{Process: "final", Kind: history.List, Replica: name,
					Group: strings.ToLower(g), Nested: nested}, w.callers[0])
			}
		}
	}
}

// compareWithDC logs where the final direct listings differ from what the DCs hold,
// which after the quiet is the truth (and where the DCs differ from each other): a
// quick reading of a run's end that does not wait for the checker.
func (w *workload) compareWithDC(t *testing.T) {
	truth := map[int]map[string][]string{}
	for _, n := range []int{1, 2} {
		conn, err := dialAdmin(w.d.pair.DC(n))
		if err != nil {
			t.Logf("compare with DC%d: %v", n, err)
			return
		}
		defer conn.Close()
		truth[n] = map[string][]string{}
		for _, g := range w.f.Groups {
			if truth[n][strings.ToLower(g)], err = readMembers(conn, g); err != nil {
				t.Logf("compare with DC%d: %v", n, err)
				return
			}
		}
	}
	for g, m := range truth[1] {
		if !equalSets(m, truth[2][g]) {
			t.Logf("after the quiet DC1 holds %v in %s, DC2 %v", m, g, truth[2][g])
		}
	}
	for _, o := range w.rec.history() {
		if o.Process != "final" || o.Nested {
			continue
		}
		if !o.OK() {
			t.Logf("final listing of %s on %s failed: %d %s %s", o.Group, o.Replica, o.Status, o.Err, o.ErrorBody)
		} else if !equalSets(o.Members, truth[1][o.Group]) {
			t.Logf("final listing of %s on %s (cache %s) is %v; DC1 holds %v", o.Group, o.Replica, o.Cache, o.Members, truth[1][o.Group])
		}
	}
}

// summarize logs the run's figures: operations by kind and outcome, and the faults.
func summarize(t *testing.T, ops []history.Op) {
	type count struct{ ok, failed, open int }
	kinds := map[string]*count{}
	var faults []string
	for _, o := range ops {
		if o.Kind == history.Fault {
			faults = append(faults, fmt.Sprintf("%s %v %v–%v", o.Fault, o.Targets,
				o.Start.Sub(ops[0].Start).Round(100*time.Millisecond), o.End.Sub(ops[0].Start).Round(100*time.Millisecond)))
			continue
		}
		c := kinds[o.Kind]
		if c == nil {
			c = &count{}
			kinds[o.Kind] = c
		}
		switch {
		case !o.Done():
			c.open++
		case o.OK():
			c.ok++
		default:
			c.failed++
		}
	}
	var b strings.Builder
	for _, k := range []string{history.List, history.Remove, history.Add, history.DirectRemove, history.DirectAdd,
		history.Disable, history.Enable, history.SignIn, history.UseTok, history.Revoke} {
		if c := kinds[k]; c != nil {
			fmt.Fprintf(&b, " %s %d/%d", k, c.ok, c.ok+c.failed+c.open)
		}
	}
	t.Logf("%d operations (kind ok/all):%s", len(ops), b.String())
	t.Logf("%d faults: %s", len(faults), strings.Join(faults, "; "))
}
