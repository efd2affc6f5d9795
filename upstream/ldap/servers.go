package ldap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// Several domain controllers (docs/directory.md, "Several domain controllers").
//
// Every DC in Config.URL's list (or found by DNS SRV) is a server with its own
// connection pool, health and circuit breaker. Calls go to the first server in order
// of preference that is up; a network error, a timeout, or an LDAP "busy" or
// "unavailable" answer marks a server down and sends the call on to the next one,
// within the same request deadline. A server marked down is probed in the background
// (connect, bind, a rootDSE read) at once, then after a backoff that starts at a second and doubles
// up to HealthInterval, and takes calls again once a probe succeeds, so a preferred
// DC that comes back is preferred again. Servers that are up are probed every
// HealthInterval too, so a failover does not land on a DC that died unnoticed.

// Breaker is a circuit breaker for one server. cmd/dirgate passes upstream/breaker's;
// nil (Config.Breaker unset) means none.
type Breaker interface {
	// Allow asks to send one call to the server. A refusal (open, or half-open with
	// its probes taken) returns an error; otherwise done must be called exactly once
	// with the call's outcome.
	Allow() (done func(err error), err error)
	// Open reports whether the breaker refuses calls right now.
	Open() bool
	// Reset closes the breaker: the server passed a health check.
	Reset()
}

// minBackoff is the first wait before a server marked down is probed again.
const minBackoff = time.Second

// minRediscovery is the shortest time between two DNS discoveries asked for because
// no known DC was up.
const minRediscovery = 10 * time.Second

// server is one domain controller.
type server struct {
	t    target
	pool *pool
	// user is t's address and TLS settings without credentials: CheckPassword binds
	// as the signing-in user over it (signin.go).
	user dialer
	brk  Breaker

	mu      sync.Mutex
	down    bool
	reason  string    // why it was marked down, for /readyz and the log
	since   time.Time // when it was marked down
	next    time.Time // when the background check probes it next
	backoff time.Duration
	probing bool
	// catchUp is set while a DC that passed its health check after being down
	// catches up by replication with the DC calls went to meanwhile (replstate.go).
	catchUp *catchUp

	calls serverCalls
}

// serverCalls counts calls by outcome, for dirgate_ldap_server_requests_total.
type serverCalls struct {
	ok, answer, failed, stalled, refused atomic.Int64
}

// ServerStatus is a server's state as /readyz and the metrics report it.
type ServerStatus struct {
	// URL names the server (scheme://host:port), the metrics' server label.
	URL string `json:"url"`
	// Up is false while the server is marked down.
	Up bool `json:"up"`
	// BreakerOpen is true while its circuit breaker refuses calls.
	BreakerOpen bool `json:"breakerOpen"`
	// Reason is why it was marked down; Since when.
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{URL: s.t.url, Up: !s.down, Reason: s.reason}
	if s.down {
		st.Since = s.since
	}
	st.BreakerOpen = s.brk != nil && s.brk.Open()
	return st
}

func (s *server) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// allow asks the breaker; done records the outcome there.
func (s *server) allow() (done func(error), err error) {
	if s.brk == nil {
		return func(error) {}, nil
	}
	return s.brk.Allow()
}

// Servers reports every server, in order of preference.
func (d *Directory) Servers() []ServerStatus {
	list := d.servers()
	out := make([]ServerStatus, len(list))
	for i, s := range list {
		out[i] = s.status()
	}
	return out
}

func (d *Directory) servers() []*server {
	if p := d.srv.Load(); p != nil {
		return *p
	}
	return nil
}

// candidates returns the servers a call may go to, in the order to try them: those
// up whose breaker is not open, in order of preference, then those marked down whose
// breaker is not open, as a last resort (a mark may be out of date, and with one DC
// there is nothing else to try). Empty when every breaker is open.
func (d *Directory) candidates() []*server {
	list := d.servers()
	up := make([]*server, 0, len(list))
	var down []*server
	for _, s := range list {
		if s.brk != nil && s.brk.Open() {
			continue
		}
		if s.isDown() {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	if len(up) == 0 && len(list) > 0 {
		d.rediscoverSoon()
	}
	return append(up, down...)
}

// markDown takes s out of rotation until a probe succeeds, and closes its idle
// connections (they died with it, or will be stale when it returns).
func (d *Directory) markDown(s *server, cause error) {
	now := d.now()
	s.mu.Lock()
	was := s.down
	if !s.down {
		s.down, s.since, s.backoff, s.catchUp = true, now, minBackoff, nil
	}
	reason := boundedReason(cause)
	s.reason = reason
	if s.next.Before(now) || !was {
		s.next = now.Add(s.backoff)
	}
	s.mu.Unlock()
	s.pool.flushIdle()
	if !was {
		d.log().Warn("ldap: domain controller marked down; calls go to the next one", "server", s.t.url, "error", reason)
		// Checked at once, not after the backoff: what marked it down may have
		// been the connections' (cut all at once), not the DC's, and calls that
		// find every breaker open wait for this check (awaitCandidates).
		d.probeSoon(s)
	}
}

// awaitCandidates waits, up to the attempt timeout, for a server to take calls
// again when every breaker is open but a health check is under way: one that passes
// closes its breaker (markUp), and the call goes on rather than answering 503 for
// what was a moment's failure. With no check under way it returns nil at once.
func (d *Directory) awaitCandidates(ctx context.Context) []*server {
	deadline := time.Now().Add(d.cfg.AttemptTimeout)
	for {
		probing := false
		for _, s := range d.servers() {
			s.mu.Lock()
			probing = probing || s.probing
			s.mu.Unlock()
		}
		if !probing || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(probePoll):
		}
		if c := d.candidates(); len(c) > 0 {
			return c
		}
	}
}

// markUp puts s back into rotation after a successful probe, its breaker closed: a
// health check of its own says more of the DC now than the failures that opened it
// (upstream/breaker's Reset).
func (d *Directory) markUp(s *server) {
	if s.brk != nil && s.brk.Open() {
		s.brk.Reset()
	}
	s.mu.Lock()
	was := s.down
	s.down, s.reason, s.backoff, s.catchUp = false, "", 0, nil
	s.next = d.now().Add(d.cfg.HealthInterval)
	since := s.since
	s.mu.Unlock()
	if was {
		d.log().Info("ldap: domain controller is up again", "server", s.t.url, "down_for", d.now().Sub(since).Round(time.Second).String())
	}
}

// boundedReason keeps a cause short enough for /readyz and a log line.
func boundedReason(err error) string {
	if err == nil {
		return "unknown"
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// probe checks s: a new connection (connect, TLS, bind) and a rootDSE read. It marks
// s up or down, and is the only way a server marked down comes back; with several
// DCs, only once it holds what the DC calls went to meanwhile held (caughtUp).
func (d *Directory) probe(ctx context.Context, s *server) {
	if s.claimProbe() {
		d.probeClaimed(ctx, s)
	}
}

// claimProbe marks a health check of s under way, false when one already is.
func (s *server) claimProbe() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probing {
		return false
	}
	s.probing = true
	return true
}

// probeClaimed is probe once claimProbe succeeded.
func (d *Directory) probeClaimed(ctx context.Context, s *server) {
	defer func() {
		s.mu.Lock()
		s.probing = false
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout+d.cfg.AttemptTimeout)
	defer cancel()
	c, err := s.pool.dial(ctx)
	if err == nil {
		var name string
		err = search(ctx, c, query{base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
			attrs: []string{"dsServiceName"}}, func(e *goldap.Entry) error {
			name = e.GetAttributeValue("dsServiceName")
			return nil
		})
		if err == nil && name == "" {
			err = errors.New("the rootDSE has no dsServiceName: not a domain controller")
		}
		caught, why := true, ""
		if err == nil && s.isDown() {
			caught, why = d.caughtUp(ctx, s, c)
		}
		_ = c.Close()
		if err == nil && !caught {
			s.mu.Lock()
			s.reason, s.next = why, d.now().Add(minBackoff)
			s.mu.Unlock()
			return
		}
		if err == nil {
			d.markUp(s)
			return
		}
	}
	d.markDown(s, fmt.Errorf("health check: %w", err))
	// With no other DC taking calls, every call fails until one comes back: it is
	// checked every second, not after a backoff grown while others served.
	alone := d.inUse(s) == nil
	s.mu.Lock()
	s.backoff = min(2*s.backoff, d.cfg.HealthInterval)
	if alone {
		s.backoff = minBackoff
	}
	s.next = d.now().Add(s.backoff)
	s.mu.Unlock()
}

// bgOr is the background context, or ctx before start (tests).
func (d *Directory) bgOr(ctx context.Context) context.Context {
	if d.bg != nil {
		return d.bg
	}
	return context.WithoutCancel(ctx)
}

// probeSoon probes s in the background, at once.
func (d *Directory) probeSoon(s *server) {
	if s.claimProbe() { // claimed here, so that the check is under way from now on
		go d.probeClaimed(d.bgOr(context.Background()), s)
	}
}

// watch runs the background checks until Close.
func (d *Directory) watch(ctx context.Context) {
	tick := time.NewTicker(min(minBackoff, d.cfg.HealthInterval))
	defer tick.Stop()
	lastDiscovery := d.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.rediscover:
			// Every known DC failed: resolve again now, but not more often than
			// minRediscovery while calls keep finding none up.
			if d.now().Sub(lastDiscovery) >= minRediscovery {
				lastDiscovery = time.Time{}
			}
		}
		now := d.now()
		if d.cfg.Domain != "" && now.Sub(lastDiscovery) >= d.cfg.DiscoveryInterval {
			if err := d.refreshTargets(ctx); err != nil {
				d.log().Warn("ldap: DNS SRV discovery failed; keeping the known domain controllers", "domain", d.cfg.Domain, "error", err)
			}
			lastDiscovery = now
		}
		for _, s := range d.servers() {
			s.mu.Lock()
			due := !s.probing && !now.Before(s.next)
			s.mu.Unlock()
			if due {
				go d.probe(ctx, s)
			}
		}
	}
}

// rediscoverSoon asks the background loop to resolve the DCs again, at most once at
// a time (every known DC failed).
func (d *Directory) rediscoverSoon() {
	if d.cfg.Domain == "" || d.rediscover == nil {
		return
	}
	select {
	case d.rediscover <- struct{}{}:
	default:
	}
}

// refreshTargets resolves the DCs again, keeping the servers (their pools and
// health) of those still listed.
func (d *Directory) refreshTargets(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout+d.cfg.AttemptTimeout)
	defer cancel()
	targets, err := d.cfg.targets(rctx)
	if err != nil {
		return err
	}
	d.setTargets(targets)
	return nil
}

// setTargets makes targets the server list, reusing the servers already known.
func (d *Directory) setTargets(targets []target) {
	d.srvMu.Lock()
	defer d.srvMu.Unlock()
	// A DC is the same server while its URL and address are (a DC whose address
	// changed gets new connections).
	old := map[string]*server{}
	for _, s := range d.servers() {
		old[s.t.url+" "+s.t.addr] = s
	}
	list := make([]*server, 0, len(targets))
	for _, t := range targets {
		if s, ok := old[t.url+" "+t.addr]; ok {
			list = append(list, s)
			delete(old, t.url+" "+t.addr)
			continue
		}
		list = append(list, d.newServer(t))
	}
	d.srv.Store(&list)
	for _, s := range old {
		d.log().Info("ldap: domain controller no longer listed by DNS", "server", s.t.url)
		s.pool.close()
		if c, ok := s.brk.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

func (d *Directory) log() *slog.Logger {
	if d.cfg.Logger != nil {
		return d.cfg.Logger
	}
	return slog.Default()
}

// errNoServer is the cause when every server's breaker is open.
var errNoServer = errors.New("ldap: every domain controller's circuit breaker is open")

// unavailable codes a call that found no server to try.
func unavailable(cause error) error {
	if cause == nil {
		cause = errNoServer
	}
	var de *dirgate.Error
	if errors.As(cause, &de) {
		return cause
	}
	return dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable; try again later.", cause)
}

// firstServer reports whether url is the first DC in order of preference.
func (d *Directory) firstServer(url string) bool {
	list := d.servers()
	return len(list) > 0 && list[0].t.url == url
}
