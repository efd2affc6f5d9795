package ldap

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// pool lends bound connections, one caller at a time each, at most size at once.
//
// go-ldap connections can carry concurrent requests, but exclusive use keeps a slow
// or broken connection from stalling unrelated requests, and a connection that saw a
// timeout can simply be closed. Measured on Samba, 4 connections serve 8 goroutines
// as fast as 1 connection does (docs/directory.md, "Connections"), so the pool costs
// no throughput.
type pool struct {
	dial    func(context.Context) (conn, error)
	maxIdle time.Duration
	now     func() time.Time

	slots chan struct{}    // one token per connection in use
	idle  chan *pooledConn // bound connections waiting for a caller

	mu     sync.Mutex
	closed bool

	// detached counts the connections in use whose slot was given back (detach).
	detached atomic.Int64

	dials, dialFailures atomic.Int64 // for metrics
}

type pooledConn struct {
	conn
	lastUsed time.Time
}

var errPoolClosed = errors.New("ldap: directory closed")

func newPool(size int, maxIdle time.Duration, dial func(context.Context) (conn, error)) *pool {
	return &pool{
		dial:    dial,
		maxIdle: maxIdle,
		now:     time.Now,
		slots:   make(chan struct{}, size),
		idle:    make(chan *pooledConn, size),
	}
}

// get waits for a free slot, then returns a healthy idle connection or dials a new
// one. fresh skips the idle connections: a retry after a network error wants a
// connection made after the failure, since the idle ones may have died with it.
func (p *pool) get(ctx context.Context, fresh bool) (*pooledConn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.take(ctx, fresh)
}

// spare is get for work that must never make a call wait for a connection (the
// change feed following another DC, follow.go): it waits for nothing, and takes a
// slot only while at least one more stays free; ok is false when it took none.
func (p *pool) spare(ctx context.Context) (pc *pooledConn, ok bool, err error) {
	if cap(p.slots)-len(p.slots) < 2 {
		return nil, false, nil
	}
	select {
	case p.slots <- struct{}{}:
	default:
		return nil, false, nil
	}
	pc, err = p.take(ctx, false)
	return pc, true, err
}

// take returns a connection for a slot the caller holds, releasing the slot on
// failure.
func (p *pool) take(ctx context.Context, fresh bool) (*pooledConn, error) {
	if p.isClosed() {
		<-p.slots
		return nil, errPoolClosed
	}
	for !fresh {
		var pc *pooledConn
		select {
		case pc = <-p.idle:
		default:
		}
		if pc == nil {
			break
		}
		if pc.IsClosing() || p.now().Sub(pc.lastUsed) > p.maxIdle {
			_ = pc.Close()
			continue
		}
		return pc, nil
	}
	c, err := p.dial(ctx)
	p.dials.Add(1)
	if err != nil {
		p.dialFailures.Add(1)
		<-p.slots
		return nil, err
	}
	return &pooledConn{conn: c}, nil
}

// put returns a connection that is still usable.
func (p *pool) put(pc *pooledConn) {
	pc.lastUsed = p.now()
	p.mu.Lock()
	closed := p.closed
	if !closed && !pc.IsClosing() {
		select {
		case p.idle <- pc:
			pc = nil
		default: // cannot happen while slots bound the connections; be safe
		}
	}
	p.mu.Unlock()
	if pc != nil {
		_ = pc.Close()
	}
	<-p.slots
}

// detach gives back the slot of a connection in use that fell silent, while the
// read on it goes on: the call hedges on a new connection (attempt.go), and when
// every slot is held by silent connections (a NAT or firewall between that lost them
// all at once) the hedges would otherwise wait for a slot until the request's
// deadline. The connection is closed, never pooled, when its read ends
// (closeDetached). At most the pool's size are detached at once, so a DC never has
// more than twice the pool's connections open; false when that many are.
func (p *pool) detach() bool {
	if p.detached.Add(1) > int64(cap(p.slots)) {
		p.detached.Add(-1)
		return false
	}
	<-p.slots
	return true
}

// closeDetached closes a connection whose slot detach gave back.
func (p *pool) closeDetached(pc *pooledConn) {
	_ = pc.Close()
	p.detached.Add(-1)
}

// discard closes a connection that failed or may be stuck.
func (p *pool) discard(pc *pooledConn) {
	_ = pc.Close()
	<-p.slots
}

func (p *pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close closes the idle connections; connections in use are closed when returned.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case pc := <-p.idle:
			_ = pc.Close()
		default:
			return
		}
	}
}

// flushIdle closes the idle connections: their server was marked down, so they died
// with it or will be stale when it returns.
func (p *pool) flushIdle() {
	for {
		select {
		case pc := <-p.idle:
			_ = pc.Close()
		default:
			return
		}
	}
}
