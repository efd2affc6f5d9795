package failover

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
)

// slowMark is what counts as a slow answer in the figures: healthy answers here
// take tens of milliseconds, a failover hedged after the 1.5 s attempt timeout
// takes more than a second.
const slowMark = time.Second

// outcome is one request of a load.
type outcome struct {
	kind, replica string
	start, end    time.Time
	r             child.Result
	why           string // non-empty: the request failed, or took over slowAnswer
}

// recorder keeps every outcome of a load.
type recorder struct {
	mu  sync.Mutex
	all []outcome
	// faultMade is when the command that made the fault returned: a sign-in that
	// started before it may have had its bind on the wire when the DC went away.
	faultMade time.Time
}

// add records r, started at start, as failed when it is not the status wanted or
// it took over slowAnswer.
func (rec *recorder) add(kind, replica string, start time.Time, r child.Result, want int) {
	why := ""
	switch {
	case r.Err != nil:
		why = "no answer"
	case r.Status != want:
		why = fmt.Sprintf("status %d, want %d", r.Status, want)
	case r.Elapsed > slowAnswer:
		why = fmt.Sprintf("took %v, over %v", r.Elapsed.Round(time.Millisecond), slowAnswer)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.all = append(rec.all, outcome{kind: kind, replica: replica, start: start, end: start.Add(r.Elapsed), r: r, why: why})
}

// figures are what a load under a fault cost.
type figures struct {
	total, failed, slow int
	// inFlight are sign-ins whose bind was on its way to the DC that went away,
	// answered 502 or 504: by design the bind is never sent twice
	// (docs/directory.md, "Several domain controllers").
	inFlight int
	max      time.Duration
	maxWhat  string
	// lastSlow is the time from the fault to the end of the last answer slower
	// than slowMark (0 when none was).
	lastSlow time.Duration
	byKind   map[string]int
	failures []string
}

func (rec *recorder) figures(fault time.Time) figures {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	f := figures{byKind: map[string]int{}}
	for _, o := range rec.all {
		f.total++
		f.byKind[o.kind]++
		if o.why != "" && o.kind == "sign-in" && (o.r.Status == 502 || o.r.Status == 504) && o.start.Before(rec.faultMade) {
			f.inFlight++
			f.failures = append(f.failures, fmt.Sprintf("(bind in flight, not resent) sign-in on %s at fault%+v: %s",
				o.replica, o.start.Sub(fault).Round(time.Millisecond), o.r))
		} else if o.why != "" {
			f.failed++
			if len(f.failures) < 8 {
				f.failures = append(f.failures, fmt.Sprintf("%s on %s at fault%+v: %s: %s", o.kind, o.replica,
					o.start.Sub(fault).Round(time.Millisecond), o.why, o.r))
			}
		}
		if o.r.Elapsed > f.max {
			f.max, f.maxWhat = o.r.Elapsed, fmt.Sprintf("%s on %s at fault%+v", o.kind, o.replica, o.start.Sub(fault).Round(time.Millisecond))
		}
		if o.r.Elapsed > slowMark {
			f.slow++
			f.lastSlow = max(f.lastSlow, o.end.Sub(fault))
		}
	}
	return f
}

func (f figures) String() string {
	kinds := make([]string, 0, len(f.byKind))
	for k, n := range f.byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	s := fmt.Sprintf("requests %d (%s); failed %d; sign-ins whose bind was in flight %d; max latency %v (%s); answers over %v: %d; fault to last such answer: %v",
		f.total, strings.Join(kinds, ", "), f.failed, f.inFlight, f.max.Round(time.Millisecond), f.maxWhat, slowMark, f.slow,
		f.lastSlow.Round(time.Millisecond))
	if len(f.failures) > 0 {
		s += "\n  first failures:\n    " + strings.Join(f.failures, "\n    ")
	}
	return s
}

// check logs the figures as FIGURES lines (docs/benchmarks.md quotes them) and
// fails the test on any failed request.
func (rec *recorder) check(t *testing.T, what string, fault time.Time) figures {
	t.Helper()
	f := rec.figures(fault)
	t.Logf("FIGURES %s: %s", what, f)
	if f.total == 0 {
		t.Errorf("%s: no request was made", what)
	}
	if f.failed != 0 {
		t.Errorf("%s: %d of %d requests failed or took over %v", what, f.failed, f.total, slowAnswer)
	}
	return f
}

// load is the traffic kept up while a fault happens, on both replicas in turn:
// two workers list cached groups, one lists with a properties set never asked for
// before (a cache miss that reaches the directory every time), and one signs in
// as smoke-alice (a bind on the directory), uses the token and signs out.
type load struct {
	cl     *cluster
	groups []string
	rec    *recorder
}

// run keeps the load up until ctx ends.
func (l *load) run(ctx context.Context) {
	reps := []struct {
		name string
		p    *child.Program
	}{{"A", l.cl.a}, {"B", l.cl.b}}
	pick := func(i int) (string, *child.Program) { r := reps[i%2]; return r.name, r.p }
	var wg sync.WaitGroup
	worker := func(do func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				do(i)
				time.Sleep(10 * time.Millisecond) // a steady load, not a saturating one
			}
		}()
	}
	bg := context.Background() // a request under way when the load ends is still counted
	for w := range 2 {
		worker(func(i int) {
			name, p := pick(i + w)
			start := time.Now()
			l.rec.add("cached listing", name, start, l.cl.list(bg, p, l.groups[i%len(l.groups)], ""), 200)
		})
	}
	worker(func(i int) {
		name, p := pick(i)
		start := time.Now()
		l.rec.add("uncached listing", name, start, l.cl.list(bg, p, l.groups[i%len(l.groups)], l.cl.newProps()), 200)
	})
	worker(func(i int) {
		name, p := pick(i)
		start := time.Now()
		for _, s := range l.cl.signIn(bg, p, l.groups[0]) {
			want := 200
			if s.kind == "sign-out" {
				want = 204
			}
			l.rec.add(s.kind, name, start, s.r, want)
			start = start.Add(s.r.Elapsed)
		}
	})
	wg.Wait()
}

// underLoad keeps the load up for a second, makes the fault, and keeps it up for
// after more; it returns the recorder and when the fault began.
func underLoad(t *testing.T, cl *cluster, groups []string, fault func(made func()), after time.Duration) (*recorder, time.Time) {
	t.Helper()
	l := &load{cl: cl, groups: groups, rec: &recorder{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	time.Sleep(time.Second)
	at := time.Now()
	var madeIn time.Duration
	fault(func() { // called by fault once the DC is gone
		l.rec.mu.Lock()
		l.rec.faultMade = time.Now()
		l.rec.mu.Unlock()
		madeIn = time.Since(at)
	})
	t.Logf("fault made in %v", madeIn.Round(time.Millisecond))
	time.Sleep(after)
	cancel()
	<-done
	return l.rec, at
}

// warm lists every group on both replicas until each answers from the cache.
func warm(t *testing.T, cl *cluster, groups ...string) {
	t.Helper()
	ctx := context.Background()
	for _, g := range groups {
		for name, p := range cl.replicas() {
			child.Eventually(t, 30*time.Second, "replica "+name+" serves "+g+" from the cache", func() (bool, string) {
				r := cl.list(ctx, p, g, "")
				return r.Status == 200 && r.Cache() == "hit", r.Cache() + " " + r.String()
			})
		}
	}
}
