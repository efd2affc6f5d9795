package throttle

import "sync"

// gate bounds the password checks in progress, from one address and from all
// together (Config.MaxSignIns, MaxSignInsPerClient): a burst of sign-ins cannot
// hold more binds against the directory than that, whatever its source. Its memory
// is bounded by MaxSignIns addresses (an address is forgotten once it has nothing
// in progress).
type gate struct {
	maxTotal, maxPerClient int

	mu       sync.Mutex
	total    int
	inFlight map[string]int
}

func newGate(cfg Config) *gate {
	return &gate{maxTotal: cfg.MaxSignIns, maxPerClient: cfg.MaxSignInsPerClient, inFlight: map[string]int{}}
}

// enter takes a place for addr, or reports false when either bound is reached.
func (g *gate) enter(addr string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.maxTotal || g.inFlight[addr] >= g.maxPerClient {
		return false
	}
	g.total++
	g.inFlight[addr]++
	return true
}

// leave gives back the place enter took.
func (g *gate) leave(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.inFlight[addr]--; g.inFlight[addr] <= 0 {
		delete(g.inFlight, addr)
	}
}
