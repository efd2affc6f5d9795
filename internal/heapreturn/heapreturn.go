// Package heapreturn hands a burst of garbage back to the system soon after it is
// made, instead of leaving it resident until the heap next doubles.
//
// By default the Go collector lets the heap grow to twice what is live before it
// runs. With the memory upstream most of what is live is the directory, hundreds of
// megabytes, so a burst of garbage (a large first listing leaves about 0.35 KB a
// member, an export's reload several times the export) stays resident, and the
// process keeps pages it will not use again until the next burst
// (docs/operations.md, "Memory"). A Returner
// reads the heap every Interval and, once the bytes allocated since the last
// collection exceed both MinGarbage and Fraction of the live heap, runs
// debug.FreeOSMemory (a collection, then every free page handed back), at most once
// per MinGap. Steady traffic that makes little garbage never triggers it; the
// collector's own pacing is unchanged, and GOMEMLIMIT still bounds the peak.
package heapreturn

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Config tunes a Returner; zero fields take the defaults.
type Config struct {
	// MinGarbage is the least garbage, in bytes, worth a collection (default 64 MiB).
	MinGarbage uint64
	// Fraction of the live heap the garbage must also exceed (default 0.25): with a
	// large live heap a collection costs more, and is made only for more garbage.
	Fraction float64
	// Interval between two reads of the heap (default 1 s).
	Interval time.Duration
	// MinGap is the least time between two forced collections (default 10 s).
	MinGap time.Duration
	Logger *slog.Logger

	// Tests replace the runtime.
	read func() Heap
	free func()
	now  func() time.Time
}

// Heap is what a Returner reads of the runtime.
type Heap struct {
	Live    uint64 // bytes marked live by the last collection
	Objects uint64 // bytes in objects now, live or not yet found dead
}

// Garbage is what was allocated since the last collection (a bound: part of it may
// still be live).
func (h Heap) Garbage() uint64 {
	if h.Objects <= h.Live {
		return 0
	}
	return h.Objects - h.Live
}

// Returner is a running returner.
type Returner struct {
	cfg      Config
	forced   atomic.Uint64
	counter  metric.Int64Counter // nil in tests that build a Returner by hand
	last     time.Time           // the last forced collection (loop goroutine only)
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closeOne sync.Once
}

// Start reads the heap every cfg.Interval until Close or ctx ends.
func Start(ctx context.Context, cfg Config) *Returner {
	ctx, cancel := context.WithCancel(ctx)
	r := &Returner{cfg: cfg.withDefaults(), cancel: cancel}
	r.counter, _ = otel.Meter("github.com/dirgate/dirgate/internal/heapreturn").Int64Counter("dirgate_memory_returns",
		metric.WithDescription("Collections dirgate ran to return a burst of garbage to the system (DIRGATE_MEMORY_RETURN_GARBAGE)."))
	r.counter.Add(ctx, 0)
	r.wg.Add(1)
	go r.loop(ctx)
	return r
}

func (cfg Config) withDefaults() Config {
	if cfg.MinGarbage == 0 {
		cfg.MinGarbage = 64 << 20
	}
	if cfg.Fraction == 0 {
		cfg.Fraction = 0.25
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.read == nil {
		cfg.read = readHeap
	}
	if cfg.free == nil {
		cfg.free = debug.FreeOSMemory
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return cfg
}

// Forced counts the collections the Returner made.
func (r *Returner) Forced() uint64 { return r.forced.Load() }

// Close stops the Returner and waits for it.
func (r *Returner) Close() {
	r.closeOne.Do(func() {
		r.cancel()
		r.wg.Wait()
	})
}

func (r *Returner) loop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.check()
		}
	}
}

// check forces a collection when the garbage is worth one and the last is far
// enough behind.
func (r *Returner) check() {
	h := r.cfg.read()
	g := h.Garbage()
	if g < r.cfg.MinGarbage || float64(g) < r.cfg.Fraction*float64(h.Live) {
		return
	}
	now := r.cfg.now()
	if !r.last.IsZero() && now.Sub(r.last) < r.cfg.MinGap {
		return
	}
	r.last = now
	r.cfg.free()
	r.forced.Add(1)
	if r.counter != nil {
		r.counter.Add(context.Background(), 1)
	}
	after := r.cfg.read()
	r.cfg.Logger.Debug("heap: garbage collected and free memory returned to the system",
		"garbage_bytes", g, "live_bytes", after.Live, "took", r.cfg.now().Sub(now).String())
}

var heapSamples = []string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes"}

func readHeap() Heap {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	var h Heap
	if s[0].Value.Kind() == metrics.KindUint64 {
		h.Live = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		h.Objects = s[1].Value.Uint64()
	}
	return h
}
