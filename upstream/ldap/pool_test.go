package ldap

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingDial hands out fakeConns and counts them.
type countingDial struct {
	n     atomic.Int32
	conns []*fakeConn
	mu    sync.Mutex
	err   error
}

func (c *countingDial) dial(context.Context) (conn, error) {
	if c.err != nil {
		return nil, c.err
	}
	c.n.Add(1)
	fc := &fakeConn{s: newFakeServer()}
	c.mu.Lock()
	c.conns = append(c.conns, fc)
	c.mu.Unlock()
	return fc, nil
}

func TestPoolReuse(t *testing.T) {
	var cd countingDial
	p := newPool(2, time.Minute, cd.dial)
	for i := 0; i < 5; i++ {
		pc, err := p.get(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		p.put(pc)
	}
	if cd.n.Load() != 1 {
		t.Errorf("dials = %d, want 1 for sequential use", cd.n.Load())
	}
	// fresh skips the idle connection.
	pc, _ := p.get(context.Background(), true)
	p.put(pc)
	if cd.n.Load() != 2 {
		t.Errorf("dials = %d after a fresh get, want 2", cd.n.Load())
	}
}

func TestPoolHealthCheck(t *testing.T) {
	var cd countingDial
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPool(1, 10*time.Minute, cd.dial)
	p.now = func() time.Time { return now }
	pc, _ := p.get(context.Background(), false)
	p.put(pc)
	// A connection the server closed is not handed out again.
	cd.conns[0].Close()
	pc, _ = p.get(context.Background(), false)
	if pc.conn == cd.conns[0] || cd.n.Load() != 2 {
		t.Fatalf("closed connection reused")
	}
	p.put(pc)
	// One idle for longer than maxIdle is closed and replaced.
	now = now.Add(11 * time.Minute)
	pc, _ = p.get(context.Background(), false)
	if pc.conn == cd.conns[1] || !cd.conns[1].IsClosing() || cd.n.Load() != 3 {
		t.Fatalf("idle connection reused or left open")
	}
	p.put(pc)
	// Within maxIdle it is reused.
	now = now.Add(9 * time.Minute)
	pc, _ = p.get(context.Background(), false)
	if pc.conn != cd.conns[2] {
		t.Fatalf("healthy connection not reused")
	}
	p.put(pc)
}

// TestPoolBound: with every connection in use, get waits; the wait ends with the
// caller's context, or when a connection comes back.
func TestPoolBound(t *testing.T) {
	var cd countingDial
	p := newPool(2, time.Minute, cd.dial)
	a, _ := p.get(context.Background(), false)
	b, _ := p.get(context.Background(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.get(ctx, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("get on a full pool with a canceled context: %v", err)
	}
	got := make(chan *pooledConn)
	go func() {
		pc, _ := p.get(context.Background(), false)
		got <- pc
	}()
	p.put(a)
	if pc := <-got; pc.conn != a.conn {
		t.Errorf("waiter did not get the returned connection")
	}
	p.discard(b)
	if !b.IsClosing() {
		t.Error("discard left the connection open")
	}
	if cd.n.Load() != 2 {
		t.Errorf("dials = %d, want 2", cd.n.Load())
	}
}

// TestPoolConcurrency: many goroutines never hold more than size connections.
func TestPoolConcurrency(t *testing.T) {
	var cd countingDial
	p := newPool(3, time.Minute, cd.dial)
	var inUse, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				pc, err := p.get(context.Background(), j%7 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				n := inUse.Add(1)
				for {
					m := peak.Load()
					if n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				inUse.Add(-1)
				if j%5 == 0 {
					p.discard(pc)
				} else {
					p.put(pc)
				}
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 3 {
		t.Errorf("peak connections in use = %d, want <= 3", peak.Load())
	}
	open := 0
	for _, c := range cd.conns {
		if !c.IsClosing() {
			open++
		}
	}
	if open > 3 {
		t.Errorf("%d connections left open, want <= 3", open)
	}
}

func TestPoolClose(t *testing.T) {
	var cd countingDial
	p := newPool(2, time.Minute, cd.dial)
	a, _ := p.get(context.Background(), false)
	b, _ := p.get(context.Background(), false)
	p.put(a)
	p.close()
	if !a.IsClosing() {
		t.Error("idle connection left open by close")
	}
	p.put(b)
	if !b.IsClosing() {
		t.Error("connection returned after close left open")
	}
	if _, err := p.get(context.Background(), false); !errors.Is(err, errPoolClosed) {
		t.Errorf("get after close: %v", err)
	}
	// A dial error gives the slot back.
	cd.err = errors.New("refused")
	q := newPool(1, time.Minute, cd.dial)
	for i := 0; i < 2; i++ {
		if _, err := q.get(context.Background(), false); err == nil {
			t.Fatal("dial error not returned")
		}
	}
}

// TestPoolSpare: a spare connection is taken only while another slot stays free,
// never waited for, and returned like any other.
func TestPoolSpare(t *testing.T) {
	var cd countingDial
	p := newPool(3, time.Minute, cd.dial)
	ctx := context.Background()
	a, err := p.get(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	s, ok, err := p.spare(ctx)
	if err != nil || !ok {
		t.Fatalf("one of three slots in use: spare = %v, %v; want a connection", ok, err)
	}
	if _, ok, _ := p.spare(ctx); ok {
		t.Fatal("two of three slots in use: spare took the last one")
	}
	p.put(s)
	b, err := p.get(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, ok, _ := p.spare(ctx); ok || time.Since(start) > time.Second {
		t.Fatalf("two of three slots in use: spare = %v after %v", ok, time.Since(start))
	}
	p.put(a)
	p.put(b)
	if got := len(p.slots); got != 0 {
		t.Fatalf("%d slots still held", got)
	}
}
