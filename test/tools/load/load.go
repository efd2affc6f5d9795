// Package load drives a group-membership API (a running dirgate, a bare net/http
// server replaying its bytes, or the domain controller itself over LDAP) with a
// bounded number of concurrent clients for a bounded time and request count, and
// reports throughput, latency percentiles, errors by status and wrong answers.
//
// Every answer is checked: a listing against the listing computed for that caller by
// an independent, uncached reference (Expect), a removal against the member's known
// state. A wrong answer is never dropped from the count: the report prints how many
// and the first few. docs/benchmarks.md describes the runs and their results.
package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Caller is one identity of the workload: the token dirgate knows it by and the
// directory object it acts as.
type Caller struct {
	Name    string
	Token   string
	Subject string // DN
}

// Query is one listing's parameters.
type Query struct {
	Group      string // DN
	Indirect   bool
	Properties []string
	SizeLimit  int
}

// RawQuery is the query string of the listing, in a fixed parameter order so that
// the same listing is the same URL (the bare server keys its answers by it).
func (q Query) RawQuery() string {
	v := "group=" + url.QueryEscape(q.Group)
	if q.Indirect {
		v += "&includeIndirect=true"
	}
	if len(q.Properties) > 0 {
		v += "&properties=" + url.QueryEscape(strings.Join(q.Properties, ","))
	}
	if q.SizeLimit > 0 {
		v += "&sizeLimit=" + strconv.Itoa(q.SizeLimit)
	}
	return v
}

// OpKind is what an operation does.
type OpKind int

const (
	// OpList is one listing.
	OpList OpKind = iota
	// OpRemoveCycle removes a member of a removal group through the target, lists the
	// group to see it gone, then re-adds it through the directory (Removals).
	OpRemoveCycle
)

// Op is one kind of request of a workload, issued with probability Weight/total.
type Op struct {
	Name   string
	Kind   OpKind
	Caller int // index in Workload.Callers
	Query  Query
	Weight int
}

// key names the answer an op expects: its caller and its query.
func (o *Op) key() string { return strconv.Itoa(o.Caller) + "\x00" + o.Query.RawQuery() }

// Workload is what the clients issue.
type Workload struct {
	Name    string
	Callers []Caller
	Ops     []Op
	// Removals are the groups whose members OpRemoveCycle removes and re-adds; a
	// listing of one of them is checked against the state its member is in.
	Removals []RemovalGroup
}

// Listings returns the workload without its removals and without listings of
// removal groups: what every target can serve (the bare server replays fixed
// bytes, and the domain controller has no removal semantics to compare).
func (w Workload) Listings() Workload {
	out := Workload{Name: w.Name, Callers: w.Callers}
	for _, op := range w.Ops {
		if op.Kind == OpList && !w.isRemovalGroup(op.Query.Group) {
			out.Ops = append(out.Ops, op)
		}
	}
	return out
}

func (w Workload) isRemovalGroup(dn string) bool {
	for _, g := range w.Removals {
		if dnKey(g.Group) == dnKey(dn) {
			return true
		}
	}
	return false
}

// Validate reports every problem of the workload at once.
func (w Workload) Validate() error {
	var errs []error
	if len(w.Ops) == 0 {
		errs = append(errs, errors.New("no operations"))
	}
	cycles := false
	for i, op := range w.Ops {
		if op.Caller < 0 || op.Caller >= len(w.Callers) {
			errs = append(errs, fmt.Errorf("op %d (%s): caller %d out of range", i, op.Name, op.Caller))
		}
		if op.Weight <= 0 {
			errs = append(errs, fmt.Errorf("op %d (%s): weight must be positive", i, op.Name))
		}
		if op.Kind == OpRemoveCycle {
			cycles = true
		} else if op.Query.Group == "" {
			errs = append(errs, fmt.Errorf("op %d (%s): no group", i, op.Name))
		}
	}
	if cycles && len(w.Removals) == 0 {
		errs = append(errs, errors.New("removal operations without removal groups"))
	}
	return errors.Join(errs...)
}

// Target serves a workload's operations. NewWorker is called once per client.
type Target interface {
	Name() string
	NewWorker(ctx context.Context) (Worker, error)
}

// Worker issues operations for one client; it is used by one goroutine.
type Worker interface {
	// Do issues op and records one sample per request it timed.
	Do(ctx context.Context, op *Op, rec *Recorder)
	Close()
}

// Options bound a run.
type Options struct {
	Concurrency int
	Duration    time.Duration // 0: only Requests bounds the run
	Requests    int64         // 0: only Duration bounds the run
	Warmup      time.Duration // run unrecorded first (fills caches, opens connections)
	Seed        uint64
	// Processes are read from /proc before and after the measured part; the report
	// gives each one's CPU time per request.
	Processes []Process
}

// Run drives target with w's operations from opts.Concurrency clients until the
// duration or the request count is reached, and returns what they recorded.
func Run(ctx context.Context, target Target, w Workload, opts Options) (*Report, error) {
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("load: workload %s: %w", w.Name, err)
	}
	if opts.Concurrency <= 0 {
		return nil, errors.New("load: concurrency must be positive")
	}
	if opts.Duration <= 0 && opts.Requests <= 0 {
		return nil, errors.New("load: a duration or a request count must bound the run")
	}
	workers := make([]Worker, opts.Concurrency)
	for i := range workers {
		wk, err := target.NewWorker(ctx)
		if err != nil {
			for _, o := range workers[:i] {
				o.Close()
			}
			return nil, fmt.Errorf("load: %s: start client %d: %w", target.Name(), i, err)
		}
		workers[i] = wk
	}
	defer func() {
		for _, wk := range workers {
			wk.Close()
		}
	}()
	if opts.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, opts.Warmup)
		drive(ctx, wctx, workers, w, opts.Seed^0x5eed, 0, nil)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	stop := ctx
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	recs := make([]*Recorder, len(workers))
	for i := range recs {
		recs[i] = &Recorder{}
	}
	before, err := cpuSnapshot(opts.Processes)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	drive(ctx, stop, workers, w, opts.Seed, opts.Requests, recs)
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	after, err := cpuSnapshot(opts.Processes)
	if err != nil {
		return nil, err
	}
	rep := newReport(target.Name(), w.Name, opts.Concurrency, elapsed, recs)
	for i, p := range opts.Processes {
		pc := ProcessCPU{Name: p.Name, CPU: after[i] - before[i]}
		if rep.All.Requests > 0 {
			pc.PerRequest = float64(pc.CPU.Microseconds()) / float64(rep.All.Requests)
		}
		rep.CPU = append(rep.CPU, pc)
	}
	return rep, nil
}

// drive runs every worker until stop ends or limit operations (when positive) have
// been started. Requests run under ctx, not stop: an operation in flight when the
// time is up completes and counts, instead of being cut off and miscounted as an
// error. recs nil means record nothing (warm-up).
func drive(ctx, stop context.Context, workers []Worker, w Workload, seed uint64, limit int64, recs []*Recorder) {
	total := 0
	for _, op := range w.Ops {
		total += op.Weight
	}
	var started atomic.Int64
	var wg sync.WaitGroup
	for i, wk := range workers {
		rec := (*Recorder)(nil)
		if recs != nil {
			rec = recs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for stop.Err() == nil {
				if limit > 0 && started.Add(1) > limit {
					return
				}
				wk.Do(ctx, pick(w.Ops, total, rng), rec)
			}
		}()
	}
	wg.Wait()
}

// pick chooses an operation with probability proportional to its weight.
func pick(ops []Op, total int, rng *rand.Rand) *Op {
	n := rng.IntN(total)
	for i := range ops {
		if n < ops[i].Weight {
			return &ops[i]
		}
		n -= ops[i].Weight
	}
	return &ops[len(ops)-1]
}
