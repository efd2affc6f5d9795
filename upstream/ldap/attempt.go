package ldap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ctxsleep"
	goldap "github.com/go-ldap/ldap/v3"
)

// How one call finds a server that answers (docs/directory.md, "Several domain
// controllers").
//
// A call is a series of attempts, each on one connection of one server. An attempt
// that fails with a network error on a connection taken from the idle pool, or on
// the last server left, is tried once more on a new connection to the same server
// (the idle one may simply have been dropped by the server). Any other network
// error, a failed dial, or an LDAP busy or unavailable answer marks the server down
// and moves the call to the next candidate. Anything else the server answers (found,
// not found, refused) is the call's answer.
//
// A DC that silently drops packets would hold an attempt until the request deadline;
// AttemptTimeout bounds how long a call waits on silence instead (every answer the
// DC sends restarts it). Reads are hedged: the silent attempt keeps running, a second
// one starts on the next DC, whichever answers first is the answer, and the silent DC
// gets a health check; a read that fell silent on a pooled connection is tried on a
// new connection to the same DC once the other DCs had their turn. The silent
// attempt gives its pool slot back (pool.detach), so that neither its hedge nor other
// calls wait behind connections that lost their path. Other calls (writes are never sent to two DCs at once) ask a
// health check and wait for it: a DC that fails it is marked down and the attempt is
// given up for the next DC; one that passes is only slow (an in-chain search sends
// nothing for seconds), and the call waits on, unless the silent connection was a
// pooled one: that connection lost its path, and a new one to the same DC follows.

// attempt is one try of a call on one server.
type attempt struct {
	s       *server
	fresh   bool        // asked for a newly dialled connection
	n       int         // 0 for the first attempt of the call
	reused  atomic.Bool // ran on a connection from the idle pool (set by the attempt, read by run)
	stalled atomic.Bool
	// lost is set when a silent pooled connection is given up while its DC passed
	// a health check: a new connection to the same DC follows.
	lost atomic.Bool
	// checked is closed when the health check started for this silent attempt
	// ends (run's loop only).
	checked chan struct{}
	last    atomic.Int64 // UnixNano of the attempt's start or its last answer
	cancel  context.CancelFunc

	// slotMu guards slot: whether the attempt holds a pool slot, gave it back
	// while silent (pool.detach), or ended.
	slotMu sync.Mutex
	slot   slotState
}

type slotState int

const (
	slotWaiting  slotState = iota // no connection yet
	slotHeld                      // a connection and its slot
	slotDetached                  // a connection whose slot was given back
	slotEnded                     // the attempt ended
)

// detach gives back the slot of a silent attempt's connection (pool.detach); the
// attempt closes the connection when it ends.
func (a *attempt) detach() {
	a.slotMu.Lock()
	defer a.slotMu.Unlock()
	if a.slot == slotHeld && a.s.pool.detach() {
		a.slot = slotDetached
	}
}

// holding records that the attempt took a connection.
func (a *attempt) holding() {
	a.slotMu.Lock()
	a.slot = slotHeld
	a.slotMu.Unlock()
}

// end records that the attempt ended, reporting whether its slot was given back.
func (a *attempt) end() (detached bool) {
	a.slotMu.Lock()
	defer a.slotMu.Unlock()
	detached = a.slot == slotDetached
	a.slot = slotEnded
	return detached
}

func (a *attempt) touch() { a.last.Store(time.Now().UnixNano()) }

// idle is how long the attempt has received nothing.
func (a *attempt) idle() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }

type result[T any] struct {
	a       *attempt
	val     T
	err     error
	closing bool // the connection was closing when the attempt ended
}

// plan hands out the attempts of one call.
type plan struct {
	servers []*server
	next    int
	again   *server // the same server once more, on a new connection
	// fresh are servers whose pooled connection fell silent, to be tried once more on
	// a new connection after the other servers: the silence may be that connection's
	// alone (a firewall or relay that dropped it without a reset), which the server's
	// health check, on a new connection, cannot see.
	fresh []*server
}

func (p *plan) take() (s *server, fresh, ok bool) {
	if p.again != nil {
		s, p.again = p.again, nil
		return s, true, true
	}
	if p.next < len(p.servers) {
		s = p.servers[p.next]
		p.next++
		return s, false, true
	}
	if len(p.fresh) > 0 {
		s, p.fresh = p.fresh[0], p.fresh[1:]
		return s, true, true
	}
	return nil, false, false
}

// kind is what an attempt's outcome means for the call.
type kind int

const (
	answered kind = iota // success, or the server's own answer: the call's result
	failover             // the server failed: try the next one
	ended                // the call's context ended
)

// classify decides what an attempt's error means. ctx is the call's context.
func classify(ctx context.Context, a *attempt, err error, closing bool) kind {
	switch {
	case err == nil:
		return answered
	case ctx.Err() != nil:
		return ended
	case a.stalled.Load(), a.lost.Load():
		return failover
	}
	var de *dialError
	if errors.As(err, &de) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A dial that failed or timed out, or an attempt-level deadline: the
		// server, not the call, ran out.
		return failover
	}
	if rc, ok := resultCode(err); ok && (rc == goldap.LDAPResultBusy || rc == goldap.LDAPResultUnavailable) {
		return failover
	}
	if isNetworkError(err) || (closing && !serverAnswered(err)) {
		return failover
	}
	return answered
}

// probePoll is how often a call waiting on a silent DC's health check looks at it.
const probePoll = 50 * time.Millisecond

// maxFreshTries bounds the new connections a read tries on DCs whose connection fell
// silent, beyond the plan's first pass.
const maxFreshTries = 2

// roundPause is the wait before a read whose every DC failed at once tries them
// again (run's second round).
const roundPause = 250 * time.Millisecond

// errStalled is why a silent attempt was given up: a timeout (504) if it was the
// last.
var errStalled = fmt.Errorf("the domain controller stopped answering: %w", context.DeadlineExceeded)

// dialError marks an error of getting a connection: the server never saw the call.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// run makes the attempts of one call under the request timeout and returns the
// answer. With hedge, an attempt that receives nothing for AttemptTimeout is joined
// by one on the next server instead of abandoned; f must then keep its state per
// call of f (it may run twice at once). retry false makes exactly one attempt.
func run[T any](ctx context.Context, d *Directory, hedge, retry bool, f func(ctx context.Context, c conn, n int) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	p := &plan{servers: d.candidates()}
	if len(p.servers) == 0 {
		if p.servers = d.awaitCandidates(ctx); len(p.servers) == 0 {
			return zero, unavailable(nil)
		}
	}
	results := make(chan result[T], 2*len(p.servers)+1)
	running, started := 0, 0
	if !hedge {
		// f may write state its caller reads after run returns (do's callers do): no
		// attempt may outlive the call. Cancelled, one ends at once.
		defer func() {
			cancel()
			for ; running > 0; running-- {
				<-results
			}
		}()
	}
	var lastErr error
	var current *attempt
	start := func() bool {
		if started > 0 && !retry {
			return false
		}
		for {
			s, fresh, ok := p.take()
			if !ok {
				return false
			}
			done, err := s.allow()
			if err != nil {
				s.calls.refused.Add(1)
				lastErr = err
				continue
			}
			a := &attempt{s: s, fresh: fresh, n: started}
			a.touch()
			actx, acancel := context.WithCancel(ctx)
			a.cancel = acancel
			started++
			running++
			current = a
			go func() {
				v, err, closing := runAttempt(actx, a, f)
				k := classify(ctx, a, err, closing)
				switch k {
				case answered:
					done(nil)
				case ended:
					done(wrap("attempt", err)) // ECANCELED is not held against the server
				default:
					if a.lost.Load() || a.reused.Load() && !a.stalled.Load() && isNetworkError(err) {
						// A pooled connection that was cut says nothing of the DC
						// (a firewall's idle timeout, a relay that restarted): the
						// call tries a new connection, whose outcome counts. Left
						// out of the breaker's count like a cancelled call, so that
						// every pooled connection cut at once does not open it.
						done(dirgate.WrapError(dirgate.ECANCELED, "", fmt.Errorf("ldap: %s: pooled connection: %w", s.t.url, err)))
						break
					}
					done(dirgate.WrapError(dirgate.EUPSTREAM, "", fmt.Errorf("ldap: %s: %w", s.t.url, err)))
				}
				results <- result[T]{a: a, val: v, err: err, closing: closing}
			}()
			return true
		}
	}
	if !start() {
		return zero, unavailable(lastErr)
	}
	// another starts a second round of a read whose every DC failed at once (a
	// refused connection, a reset), after roundPause, if the request leaves time for
	// it: a DC whose service restarts, or a relay between, refuses for an instant,
	// and with the other DCs down that instant would be the call's answer. With one
	// DC the call keeps its single retry.
	rounds, freshTries := 0, 0
	another := func() bool {
		if rounds > 0 || !d.multiDC() {
			return false
		}
		if ctxsleep.Sleep(ctx, roundPause); ctx.Err() != nil {
			return false
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.cfg.AttemptTimeout {
			return false
		}
		rounds++
		p.servers, p.next, p.again, p.fresh = d.candidates(), 0, nil, nil
		return start()
	}
	timer := time.NewTimer(d.cfg.AttemptTimeout)
	defer timer.Stop()
	for running > 0 {
		select {
		case r := <-results:
			running--
			r.a.cancel()
			switch classify(ctx, r.a, r.err, r.closing) {
			case answered:
				if r.a.s.isDown() {
					d.markUp(r.a.s) // it answered: as good as a health check
				}
				if r.err == nil || noSuchObject(r.err) {
					// "No such object" counts as a success: a look-up of an object
					// hidden from its caller succeeds, and the caller is answered
					// as for one that does not exist, so the metric must not tell
					// the two apart (docs/operations.md, "What the metrics can
					// reveal").
					r.a.s.calls.ok.Add(1)
				} else {
					r.a.s.calls.answer.Add(1)
				}
				return r.val, r.err
			case ended:
				if running > 0 && ctx.Err() == nil {
					continue // a hedged attempt cancelled: the others go on
				}
				return zero, fmt.Errorf("%w (%v)", ctx.Err(), r.err)
			}
			if r.a.stalled.Load() {
				r.err = fmt.Errorf("no answer within %v (the attempt timeout) and the health check failed: %w",
					d.cfg.AttemptTimeout, errStalled)
			}
			lastErr = fmt.Errorf("%s: %w", r.a.s.t.url, r.err)
			var de *dialError
			if r.a.lost.Load() {
				lastErr = fmt.Errorf("%s: a pooled connection fell silent while the DC answered a new one: %w", r.a.s.t.url, r.err)
				p.again = r.a.s
			} else if !r.a.fresh && !r.a.stalled.Load() && !errors.As(r.err, &de) && p.again == nil && r.a.n == started-1 &&
				(r.a.reused.Load() || p.next >= len(p.servers)) {
				// Once more on a new connection to the same server: an idle connection
				// may just have been dropped, and with no other server left this is
				// the single-server adapter's one retry.
				p.again = r.a.s
			} else {
				if !r.a.stalled.Load() {
					r.a.s.calls.failed.Add(1) // a stall was counted when it was seen
				}
				d.markDown(r.a.s, r.err)
			}
			if running == 0 && !start() && !(hedge && retry && another()) {
				return zero, lastErr
			}
			if running > 0 && r.a == current {
				// The latest attempt failed while an older, silent one still runs:
				// hedge at once rather than wait for it.
				if start() {
					timer.Reset(d.cfg.AttemptTimeout)
				}
			}
		case <-timer.C:
			if ctx.Err() != nil {
				continue // the call is ending: ctx.Done decides
			}
			if idle := current.idle(); idle < d.cfg.AttemptTimeout {
				timer.Reset(d.cfg.AttemptTimeout - idle)
				continue
			}
			stalled := current
			if hedge {
				// Keep it: the DC may only be slow. A health check tells. Its
				// slot is given back, so that the hedge never waits for the
				// slots of silent connections.
				stalled.s.calls.stalled.Add(1)
				d.probeSoon(stalled.s)
				stalled.detach()
				if stalled.reused.Load() {
					// A pooled connection fell silent: the others idle beside it
					// may have lost their path the same way, and would each hold
					// a call for the attempt timeout.
					stalled.s.pool.flushIdle()
				}
				if retry && freshTries < maxFreshTries {
					// Once more on a new connection to that DC, after the others:
					// the silence may be the connection's alone (its path lost
					// while it was being made, too).
					freshTries++
					p.fresh = append(p.fresh, stalled.s)
				}
				if start() {
					timer.Reset(d.cfg.AttemptTimeout)
				}
				continue
			}
			// Not hedged: a write is never sent to two DCs at once, and a slow read
			// (an in-chain search sends nothing for seconds) must not be cut. A
			// health check decides: a DC that fails it is marked down, and only then
			// is the attempt given up.
			switch {
			case stalled.s.isDown():
				stalled.s.calls.stalled.Add(1)
				stalled.stalled.Store(true)
				stalled.cancel() // its result arrives as a failover
			case stalled.checked == nil:
				stalled.checked = make(chan struct{})
				go func(a *attempt) { d.probe(d.bgOr(ctx), a.s); close(a.checked) }(stalled)
				timer.Reset(probePoll)
			default:
				select {
				case <-stalled.checked:
					if stalled.reused.Load() && retry && freshTries < maxFreshTries && p.again == nil {
						// The DC answers a new connection while this pooled one is
						// silent: the silence is the connection's (its path lost, a
						// NAT's state gone). Given up for a new connection to the
						// same DC, as a cut connection is; the DC stays up.
						freshTries++
						stalled.lost.Store(true)
						stalled.s.pool.flushIdle() // idle beside it: likely lost too
						stalled.cancel()           // its result arrives as a failover
						break
					}
					// The DC passed: it is only slow. Wait another AttemptTimeout.
					stalled.checked = nil
					stalled.touch()
					timer.Reset(d.cfg.AttemptTimeout)
				default:
					timer.Reset(probePoll)
				}
			}
		case <-ctx.Done():
			// Attempts end on their own (their contexts derive from ctx); their
			// results go to the buffered channel.
			if lastErr == nil {
				lastErr = errors.New("no answer")
			}
			return zero, fmt.Errorf("%w (%v)", ctx.Err(), lastErr)
		}
	}
	return zero, lastErr
}

// runAttempt takes a connection of a.s and runs f on it, the way the single-server
// adapter always did: a connection that failed, or whose call ended by its context,
// is discarded (it may still carry the abandoned request); one that answered goes
// back to the pool.
func runAttempt[T any](ctx context.Context, a *attempt, f func(ctx context.Context, c conn, n int) (T, error)) (v T, err error, closing bool) {
	pc, err := a.s.pool.get(ctx, a.fresh)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errPoolClosed) {
			err = &dialError{err}
		}
		return v, err, false
	}
	a.holding()
	ctx = context.WithValue(ctx, serverKey{}, a.s)
	a.reused.Store(!pc.lastUsed.IsZero())
	if !a.reused.Load() {
		a.touch() // a new connection's bind was answered
	}
	v, err = f(ctx, watched{conn: pc.conn, touch: a.touch}, a.n)
	closing = pc.IsClosing()
	switch {
	case a.end():
		a.s.pool.closeDetached(pc)
	case err == nil:
		a.s.pool.put(pc)
	case ctx.Err() != nil, isNetworkError(err), closing && !serverAnswered(err):
		a.s.pool.discard(pc)
	default:
		a.s.pool.put(pc)
	}
	return v, err, closing
}

// serverKey carries the attempt's server in its context, for the calls that need to
// know which DC answered (overlay.go).
type serverKey struct{}

// servedBy returns the URL of the server an attempt's context belongs to.
func servedBy(ctx context.Context) string {
	if s, ok := ctx.Value(serverKey{}).(*server); ok {
		return s.t.url
	}
	return ""
}

// watched reports every answer the server sends on a connection, so that a call
// knows how long a server has been silent.
type watched struct {
	conn
	touch func()
}

func (w watched) SearchAsync(ctx context.Context, req *goldap.SearchRequest, bufferSize int) goldap.Response {
	return watchedResponse{Response: w.conn.SearchAsync(ctx, req, bufferSize), touch: w.touch}
}

func (w watched) Modify(req *goldap.ModifyRequest) error {
	err := w.conn.Modify(req)
	w.touch()
	return err
}

type watchedResponse struct {
	goldap.Response
	touch func()
}

func (r watchedResponse) Next() bool {
	ok := r.Response.Next()
	r.touch()
	return ok
}

// noSuchObject reports whether err is the directory's "no such object", as LDAP sends
// it or as the adapter says it.
func noSuchObject(err error) bool {
	rc, ok := resultCode(err)
	return ok && rc == goldap.LDAPResultNoSuchObject || dirgate.ErrorCode(err) == dirgate.ENOTFOUND
}
