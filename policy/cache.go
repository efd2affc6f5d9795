package policy

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy/translate"
	"github.com/open-policy-agent/opa/v1/rego"
	"golang.org/x/sync/singleflight"
)

// plan is how one version decides the listings of one caller for one request shape
// (action, group, request parameters): a Go predicate from the translated residual;
// when the residual is beyond the translator, the residual evaluated in Rego; when
// partial evaluation failed, or the residual refers to the policy's rules
// (beyondResidual), the whole policy evaluated in Rego.
type plan struct {
	pred *translate.Predicate
	// residual evaluates, in Rego, a residual the translator refused.
	residual *rego.PreparedEvalQuery
	// queries is the residual's size, for the decision log's diagnostics.
	queries int
	// why the residual was not translated ("" when pred is set).
	why string
	// recent remembers the predicate's decisions for the listings it decided lately
	// (a caller lists a few groups in turn), in a ring written at next.
	recent [recentListings]atomic.Pointer[decided]
	next   atomic.Uint32
	// viewed is the predicate's last one-object decision (visible.go).
	viewed atomic.Pointer[viewedObject]
	// props, in a version's propPlans only, is the property rule's plan.
	props *propPlan
}

// recentListings is how many listings' decisions a plan remembers.
const recentListings = 8

// decided is one listing's complete decisions. Cached listings are shared and never
// modified, so a listing is known by its first object's address and its length. The
// address is held weakly: remembering decisions does not keep a listing alive, and
// a weak pointer never equals one made from another listing allocated later at the
// same address.
type decided struct {
	first   weak.Pointer[dirgate.Object]
	n       int
	allowed []bool // never modified once remembered: requests read it shared
	// sel is allowed's positions, made once with it: a request that reuses the
	// decisions then does nothing per object (for a listing of 2,000, copying,
	// counting and selecting were a few µs of every request).
	sel dirgate.Selection
	// memo is what the decision log works out once from these decisions (its
	// deniedGuids array): every later request of this caller on this listing
	// reuses it.
	memo Memo
	// props is the property rule's outcome over these decisions for the last
	// requested properties, size limit and confidential attributes it was worked
	// out for (withholdRemembered): the same plan deciding the same listing leaves
	// out the same properties, so a caller listing it again does no per-object
	// property work, and one left nothing out is answered with a shared body.
	props atomic.Pointer[propOutcome]
}

// reused returns the remembered decisions of objs, if there are some.
func (p *plan) reused(objs []dirgate.Object) *decided {
	first := weak.Make(&objs[0])
	for i := range p.recent {
		if d := p.recent[i].Load(); d != nil && d.n == len(objs) && d.first == first {
			return d
		}
	}
	return nil
}

// remember keeps the complete decisions of objs.
func (p *plan) remember(objs []dirgate.Object, allowed []bool) *decided {
	d := &decided{first: weak.Make(&objs[0]), n: len(objs), allowed: append([]bool(nil), allowed...), sel: dirgate.SelectionOf(allowed)}
	p.recent[(p.next.Add(1)-1)%recentListings].Store(d)
	return d
}

// planCache keeps the most recently used plans of one policy version; it is
// dropped with its version, so a reload invalidates it without a scan.
//
// The LRU is written here rather than taken from golang-lru (which the throttle and
// the cache use) because every listing and every view decision looks a plan up,
// and both of golang-lru's forms were slower at that: its Cache by 10 to 25 ns a
// look-up (a read-write lock), its simplelru under this mutex by about 1 ns (a map
// with a generic key); docs/benchmarks.md, "The LRUs", has the figures of
// BenchmarkPlanCache.
type planCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element
	group singleflight.Group
	// retryAfter, when positive, makes a build that failed answer its error at once
	// for that long instead of being tried again by every request: a candidate's
	// plan that runs out of its budget would otherwise cost every listing the whole
	// budget. failed holds those errors, at most max of them.
	retryAfter time.Duration
	failed     map[string]planFailure
}

type planFailure struct {
	err   error
	until time.Time
}

type planEntry struct {
	key  string
	plan *plan
}

func newPlanCache(max int) *planCache {
	if max <= 0 {
		max = DefaultPlanCacheSize
	}
	return &planCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *planCache) get(key string) (*plan, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*planEntry).plan, true
	}
	return nil, false
}

func (c *planCache) put(key string, p *plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*planEntry).plan = p
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&planEntry{key: key, plan: p})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*planEntry).key)
	}
}

func (c *planCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// getOrBuild returns the cached plan for key or builds it once, however many
// requests ask for it at the same time.
func (c *planCache) getOrBuild(key string, build func() (*plan, error)) (*plan, bool, error) {
	if p, ok := c.get(key); ok {
		return p, true, nil
	}
	if err := c.recentFailure(key); err != nil {
		return nil, false, err
	}
	v, err, _ := c.group.Do(key, func() (any, error) {
		if p, ok := c.get(key); ok {
			return p, nil
		}
		p, err := build()
		if err != nil {
			c.fail(key, err)
			return nil, err
		}
		c.put(key, p)
		return p, nil
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*plan), false, nil
}

// recentFailure returns the error of a build of key that failed less than
// retryAfter ago.
func (c *planCache) recentFailure(key string) error {
	if c.retryAfter <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.failed[key]; ok {
		if time.Now().Before(f.until) {
			return f.err
		}
		delete(c.failed, key)
	}
	return nil
}

func (c *planCache) fail(key string, err error) {
	if c.retryAfter <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil || len(c.failed) >= c.max {
		c.failed = map[string]planFailure{} // bounded: forget them all, they are retried
	}
	c.failed[key] = planFailure{err: err, until: time.Now().Add(c.retryAfter)}
}
