package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
)

// Groups are fixture groups of various shapes (nested, cyclic, escaped, mixed), all
// readable by the fixture's administrator.
var Groups = []string{
	fixture.HelpDeskDN, fixture.ITSupportDN, fixture.ServiceDeskLeadsDN, fixture.DesktopEngineersDN,
	fixture.DirectoryAdminsDN, fixture.ProjectAlphaDN, fixture.SalesEastDN, fixture.FinanceTeamDN,
	fixture.EscapedGroupDN, fixture.MixedDN, fixture.AccountStatesDN, fixture.NewsletterDN,
}

// Tally counts the outcomes of a load and which of them were lost (failed although
// the test's expectation says they must not).
type Tally struct {
	mu        sync.Mutex
	total     int
	lost      int
	statuses  map[int]int
	caches    map[string]int
	transport int
	examples  []string
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{statuses: map[int]int{}, caches: map[string]int{}} }

// Add records r; a non-empty why marks it lost, with the reason.
func (t *Tally) Add(r child.Result, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	if r.Err != nil {
		t.transport++
	} else {
		t.statuses[r.Status]++
		if c := r.Cache(); c != "" {
			t.caches[c]++
		}
	}
	if why != "" {
		t.lost++
		if len(t.examples) < 5 {
			t.examples = append(t.examples, why+": "+r.String())
		}
	}
}

// Lost returns how many requests failed the expectation.
func (t *Tally) Lost() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost
}

// Total returns how many requests were recorded.
func (t *Tally) Total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Statuses returns a copy of the status counts.
func (t *Tally) Statuses() map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int]int, len(t.statuses))
	for k, v := range t.statuses {
		out[k] = v
	}
	return out
}

// Caches returns a copy of the X-Dirgate-Cache counts.
func (t *Tally) Caches() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.caches))
	for k, v := range t.caches {
		out[k] = v
	}
	return out
}

// Summary is the line every fault test logs: "lost: N requests failed (…)".
func (t *Tally) Summary(expectation string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st []string
	for _, s := range sortedKeys(t.statuses) {
		st = append(st, fmt.Sprintf("%d×%d", s, t.statuses[s]))
	}
	var ca []string
	for _, c := range sortedKeys(t.caches) {
		ca = append(ca, fmt.Sprintf("%s×%d", c, t.caches[c]))
	}
	if len(ca) == 0 {
		ca = []string{"none"}
	}
	s := fmt.Sprintf("lost: %d requests failed (of %d; statuses %s; cache %s; transport errors %d; expected: %s)",
		t.lost, t.total, strings.Join(st, " "), strings.Join(ca, " "), t.transport, expectation)
	if len(t.examples) > 0 {
		s += "\n  first failures:\n    " + strings.Join(t.examples, "\n    ")
	}
	return s
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Drive runs workers goroutines that call do with request numbers 0, 1, 2, … until
// n requests were made (n <= 0: no bound) or ctx ends, and waits for them.
func Drive(ctx context.Context, workers, n int, do func(ctx context.Context, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if n > 0 && i >= n {
					return
				}
				do(ctx, i)
			}
		}()
	}
	wg.Wait()
}
