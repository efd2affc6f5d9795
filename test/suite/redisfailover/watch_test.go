package redisfailover

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
)

// watch records what the watchers saw.
type watch struct {
	mu       sync.Mutex
	total    int
	failures int
	caches   map[string]int
	statuses map[int]int
	broken   map[string]*breach // by what was watched and how it broke
}

// breach is one way one watched thing broke the guarantee.
type breach struct {
	n           int
	first, last time.Time
	example     string
}

func (w *watch) add(what string, r child.Result, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.caches == nil {
		w.caches, w.statuses, w.broken = map[string]int{}, map[int]int{}, map[string]*breach{}
	}
	w.total++
	w.statuses[r.Status]++
	if c := r.Cache(); c != "" {
		w.caches[c]++
	}
	if why == "" {
		return
	}
	w.failures++
	key := what + ": " + why
	b := w.broken[key]
	if b == nil {
		b = &breach{first: time.Now(), example: r.String()}
		if dns := r.DNs(); dns != nil {
			b.example = fmt.Sprintf("%d, cache %s: %v", r.Status, r.Cache(), dns)
		}
		w.broken[key] = b
	}
	b.n++
	b.last = time.Now()
}

// summary reports the counts and each way the guarantee broke, timed from the kill.
func (w *watch) summary(killed time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := fmt.Sprintf("%d answers, %d broke the guarantee (statuses %v, cache %v)", w.total, w.failures, w.statuses, w.caches)
	keys := make([]string, 0, len(w.broken))
	for k := range w.broken {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b := w.broken[k]
		s += fmt.Sprintf("\n    %s: %d times, from %+.2fs to %+.2fs; first: %s", k, b.n,
			b.first.Sub(killed).Seconds(), b.last.Sub(killed).Seconds(), b.example)
	}
	return s
}
