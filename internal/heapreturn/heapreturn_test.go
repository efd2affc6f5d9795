package heapreturn

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// fake is a runtime whose heap the test sets.
type fake struct {
	heap  Heap
	now   time.Time
	freed int
}

func (f *fake) returner(cfg Config) *Returner {
	cfg.read = func() Heap { return f.heap }
	cfg.free = func() { f.freed++; f.heap.Objects = f.heap.Live }
	cfg.now = func() time.Time { return f.now }
	return &Returner{cfg: cfg.withDefaults()} // no goroutine: the test calls check
}

func TestCheck(t *testing.T) {
	const mib = 1 << 20
	f := &fake{now: time.Unix(1000, 0)}
	r := f.returner(Config{})
	steps := []struct {
		name          string
		live, objects uint64
		after         time.Duration
		wantFreed     int
	}{
		{"little garbage", 100 * mib, 150 * mib, 0, 0},
		{"enough garbage, small share of a large live heap", 400 * mib, 480 * mib, 0, 0},
		{"enough garbage", 100 * mib, 200 * mib, 0, 1},
		{"again too soon", 100 * mib, 200 * mib, 5 * time.Second, 1},
		{"again after the gap", 100 * mib, 200 * mib, 10 * time.Second, 2},
		{"nothing live yet", 0, 70 * mib, 20 * time.Second, 3},
		{"objects below live (a collection in between)", 100 * mib, 90 * mib, 40 * time.Second, 3},
	}
	for _, s := range steps {
		f.heap = Heap{Live: s.live, Objects: s.objects}
		f.now = f.now.Add(s.after)
		r.check()
		if f.freed != s.wantFreed || r.Forced() != uint64(s.wantFreed) {
			t.Fatalf("%s: freed %d times (Forced %d), want %d", s.name, f.freed, r.Forced(), s.wantFreed)
		}
	}
}

func TestConfigBounds(t *testing.T) {
	f := &fake{now: time.Unix(1000, 0)}
	r := f.returner(Config{MinGarbage: 1 << 10, Fraction: 2, MinGap: time.Minute})
	f.heap = Heap{Live: 10 << 10, Objects: 25 << 10} // 15 KiB garbage: below twice the live heap
	r.check()
	f.heap = Heap{Live: 10 << 10, Objects: 31 << 10}
	r.check()
	f.heap = Heap{Live: 10 << 10, Objects: 31 << 10}
	f.now = f.now.Add(59 * time.Second)
	r.check()
	if f.freed != 1 {
		t.Fatalf("freed %d times, want 1", f.freed)
	}
}

// TestReturnsGarbage runs a real Returner on this process: with the collector
// off, garbage stays in the heap until the Returner collects it and hands the pages
// back (the runtime's released bytes grow by about as much).
func TestReturnsGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	debug.FreeOSMemory()
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	const chunk, total = 1 << 20, 96 << 20
	for i := 0; i < total/chunk; i++ {
		b := make([]byte, chunk)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1 // resident
		}
		sink = b
	}
	sink = nil
	if g := readHeap().Garbage(); g < total/2 {
		t.Fatalf("garbage %d bytes after allocating %d with the collector off", g, total)
	}
	before := released()
	r := Start(context.Background(), Config{MinGarbage: 32 << 20, Interval: 10 * time.Millisecond})
	defer r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for r.Forced() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.Forced() == 0 {
		t.Fatal("no collection within 10 s of 96 MiB of garbage")
	}
	if got := released(); got < before+total/2 {
		t.Fatalf("%d bytes returned to the system, want at least %d", got-min(got, before), total/2)
	}
	if g := readHeap().Garbage(); g >= 32<<20 {
		t.Errorf("garbage %d bytes after the collection", g)
	}
}

var sink []byte
