package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/auth/tokenfile"
	"github.com/dirgate/dirgate/cache"
	"github.com/dirgate/dirgate/changefeed"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/policy/explain"
	"github.com/dirgate/dirgate/redisconn"
	"github.com/dirgate/dirgate/throttle"
	"github.com/dirgate/dirgate/upstream/breaker"
	"github.com/dirgate/dirgate/upstream/domains"
	"github.com/dirgate/dirgate/upstream/ldap"
	"github.com/dirgate/dirgate/upstream/memory"
	"github.com/dirgate/dirgate/writejournal"
)

// openDirectory builds the configured upstream.
func (m *Main) openDirectory(ctx context.Context) (dirgate.Directory, error) {
	switch m.Config.Upstream {
	case "memory":
		d, err := memory.Config{LDIF: m.Config.MemoryLDIF}.Open()
		if err != nil {
			return nil, fmt.Errorf("memory upstream: %w", err)
		}
		if m.Config.MemoryLDIF != "" {
			// Each instance watches its own file: no election.
			m.changes, m.changesPerInstance = []domains.DomainChanges{{Source: d}}, true
		} else {
			d.SetPasswords(demoPasswords)
		}
		m.checker, m.schema = d, d
		return d, nil
	case "ldap":
		cfg, err := m.ldapConfig()
		if err != nil {
			return nil, err
		}
		d, err := cfg.Open(ctx)
		if err != nil {
			return nil, fmt.Errorf("ldap upstream: %w", err)
		}
		m.closers = append(m.closers, func() error { d.Close(); return nil })
		m.checker, m.schema = d, d
		m.forestOfSeveral = len(d.ForestDomainNCs()) > 0
		m.ready.add("upstream", func(context.Context) error { return serversReady(d.Servers()) })
		// Each DC has its own breaker (serverBreaker); the wrapper only records
		// spans and durations.
		home := breaker.New(d, breaker.Settings{Name: "ldap", TelemetryOnly: true})
		if m.Config.LDAPDomainsFile == "" {
			m.changes = []domains.DomainChanges{{Source: d}}
			return home, nil // one domain: no router in the way
		}
		return m.openDomains(ctx, cfg, d, home)
	}
	return nil, fmt.Errorf("upstream %q is not available in this build", m.Config.Upstream)
}

// The Redis counts of failed sign-ins are the throttle's shared Counter.
var _ throttle.Counter = (*session.RedisFailures)(nil)

// openThrottle builds the throttle of failed authentications and password checks
// (auth-*, signin-max-concurrent* settings): in process, and with Redis
// counting sign-ins across replicas as well (docs/auth.md, "Throttling").
func (m *Main) openThrottle() (*throttle.Throttle, error) {
	cfg := m.Config.Throttle
	cfg.Logger = m.Logger
	if m.signInFailures != nil { // a nil pointer must stay a nil interface
		cfg.Shared = m.signInFailures
	}
	th, err := throttle.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("throttle: %w", err)
	}
	return th, nil
}

// ldapConfig is the LDAP upstream's configuration: its settings, with each domain
// controller's circuit breaker and the write journal the replicas share
// (writeJournal).
func (m *Main) ldapConfig() (ldap.Config, error) {
	journal, err := m.writeJournal()
	if err != nil {
		return ldap.Config{}, err
	}
	cfg := m.Config.LDAP
	cfg.Breaker, cfg.Journal, cfg.Logger = m.serverBreaker("ldap"), journal, m.Logger
	return cfg, nil
}

// writeJournal is where the LDAP adapter shares the membership writes it lays over
// listings from other DCs (docs/cache.md, "Remembered membership writes"): Redis,
// with the cache's key prefix, secret, timeout and retry interval; nil without Redis,
// when each replica remembers its own writes only. Never a nil *writejournal.Journal
// in the interface, which the adapter would call.
func (m *Main) writeJournal() (ldap.WriteJournal, error) {
	if m.redis == nil {
		return nil, nil
	}
	secret, err := m.readSecret()
	if err != nil {
		return nil, err
	}
	cc := m.Config.Cache
	j, err := writejournal.Config{Redis: m.redis, KeyPrefix: cc.KeyPrefix, Secret: secret,
		Timeout: cc.Timeout, RetryInterval: cc.RetryInterval, Logger: m.Logger}.Open()
	if err != nil {
		return nil, fmt.Errorf("write journal: %w", err)
	}
	return j, nil
}

// serverBreaker gives each domain controller its own circuit breaker, with the
// breaker-* settings, logging its changes of state.
func (m *Main) serverBreaker(name string) func(server string) ldap.Breaker {
	settings := m.Config.Breaker
	settings.Name = name
	settings.OnServerStateChange = func(name, server string, from, to breaker.State) {
		m.Logger.Warn("circuit breaker changed state", "upstream", name, "server", server, "from", from.String(), "to", to.String())
	}
	return func(server string) ldap.Breaker { return breaker.NewServer(settings, server) }
}

// serversReady reports the domain controllers on /readyz: ok while the preferred one
// takes calls; otherwise which are down or cut off, and which one serves.
func serversReady(servers []ldap.ServerStatus) error {
	var bad []string
	serving := ""
	for i, s := range servers {
		switch {
		case s.BreakerOpen:
			bad = append(bad, s.URL+": circuit breaker open")
		case !s.Up:
			bad = append(bad, s.URL+": down") // the reason is in the log: /readyz needs no token
		case serving == "":
			serving = s.URL
			if i == 0 {
				return nil
			}
		}
	}
	if serving == "" {
		return fmt.Errorf("no domain controller takes calls: %s", strings.Join(bad, "; "))
	}
	return fmt.Errorf("serving from %s; %s", serving, strings.Join(bad, "; "))
}

// withBreaker puts the circuit breaker in front of a network upstream and reports
// its state on readiness and in the log.
func (m *Main) withBreaker(name string, d dirgate.Directory) dirgate.Directory {
	settings := m.Config.Breaker
	settings.Name = name
	settings.OnStateChange = func(name string, from, to breaker.State) {
		m.Logger.Warn("circuit breaker changed state", "upstream", name, "from", from.String(), "to", to.String())
	}
	b := breaker.New(d, settings)
	m.ready.add("upstream", func(context.Context) error {
		if s := b.State(); s == breaker.StateOpen {
			return fmt.Errorf("circuit breaker %s", s)
		}
		return nil
	})
	return b
}

// openPolicy loads the Rego policy that decides what each caller may view and
// remove, watches it for edits, and opens the decision log.
func (m *Main) openPolicy(ctx context.Context, svc *dirgate.MemberService) error {
	dlog, closeDlog, err := decisionlog.Open(m.Config.DecisionLog, m.stdout, m.stderr)
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	if dlog != nil {
		// Batched like the logs; the file is closed only after its last lines.
		lw := m.lines(dlog)
		m.closers = append(m.closers, func() error {
			err := lw.Close()
			return errors.Join(err, closeDlog())
		})
		dlog = lw
	} else {
		m.closers = append(m.closers, closeDlog)
	}
	pcfg := policy.Config{Dir: m.Config.PolicyDir, Logger: m.Logger, Schema: m.schema,
		NetworkBuiltins: m.Config.PolicyNetworkBuiltins}
	ccfg := candidate.Config{Dir: m.Config.PolicyCandidateDir, Sample: &m.Config.PolicyCandidateSample, Logger: m.Logger,
		NetworkBuiltins: m.Config.PolicyNetworkBuiltins}
	if m.Config.PolicyNetworkBuiltins {
		m.Logger.Warn("policy: INSECURE: policies may call http.send, net.lookup_ip_addr and opa.runtime (DIRGATE_POLICY_NETWORK_BUILTINS is set): a policy can send what it reads anywhere")
	}
	dcfg := decisionlog.Config{Writer: dlog, Mask: m.Config.decisionLogMasks(), MaxDenied: &m.Config.DecisionLogMaxDenied, Logger: m.Logger}
	rt, err := m.openBundles(ctx, &pcfg, &ccfg, &dcfg)
	if err != nil {
		return err
	}
	if dcfg.Writer != nil || dcfg.Sink != nil {
		d, err := decisionlog.New(dcfg)
		if err != nil {
			return fmt.Errorf("decision log: %w", err)
		}
		pcfg.DecisionLog = d
	}
	var cand *candidate.Candidate
	if ccfg.Dir != "" || ccfg.Files != nil {
		if pcfg.DecisionLog != nil {
			ccfg.MaxNamed = pcfg.DecisionLog.MaxNamed() // without a decision log, differences are only counted
		}
		if cand, err = candidate.Open(ctx, ccfg); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		m.closers = append(m.closers, cand.Close)
		if err := cand.Watch(ctx); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		pcfg.Shadow = cand
	}
	authz, err := policy.Open(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	m.closers = append(m.closers, authz.Close)
	if err := authz.Watch(ctx); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if rt != nil {
		var fed opaconfig.Policy // a nil *Candidate must stay a nil interface
		if m.Config.PolicyCandidateBundle != "" {
			fed = cand
		}
		if err := rt.Attach(ctx, authz, fed); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	}
	svc.Authz = authz
	m.signInPolicy = authz
	m.decisions = explain.New(svc, authz, m.Config.PolicyDrafts, m.Logger)
	// Reported, not gating: every replica reads the same policy, and a failed reload
	// keeps the last good version serving.
	m.ready.add("policy", func(context.Context) error { return authz.Ready() })
	if cand != nil {
		m.ready.add("policyCandidate", func(context.Context) error { return cand.Ready() })
	}
	return nil
}

// openCache puts the listing cache in front of the directory: Redis when configured,
// in process otherwise. The cache is itself a Directory (it caches lookups and
// invalidates on removal) and the member service's Lister.
func (m *Main) openCache(ctx context.Context, dir dirgate.Directory) (*cache.Cache, error) {
	cfg := m.Config.Cache
	secret, err := m.readSecret()
	if err != nil {
		return nil, err
	}
	cfg.Secret, cfg.Logger = secret, m.Logger
	if t, ok := dir.(dirgate.TransitiveLister); ok && m.Config.LDAP.UseInChain {
		if m.forestOfSeveral {
			// The rule matches only what the DC holds: members held by the
			// forest's other domains would be missing (docs/directory.md,
			// "Members held by another domain of the forest").
			m.Logger.Warn("ldap-in-chain is not used: the forest holds several domains, whose members the in-chain rule does not see; nested groups are expanded breadth-first")
		} else {
			cfg.Transitive = t
		}
	}
	if m.redis != nil {
		cfg.Redis = m.redis
		cfg.History = m.redisHistory()
	}
	c, err := cfg.Open(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	m.closers = append(m.closers, c.Close)
	if m.redis != nil {
		rcfg := m.redisConfig()
		if c.Ready(ctx) == nil {
			// Logged once at start; requests do not depend on it.
			m.Logger.Info("cache: redis answers", "mode", rcfg.WithDefaults().Mode, "addrs", rcfg.Addrs)
		}
		// Reported, not gating: Redis is shared. /readyz needs no token, so the
		// client's error text (addresses) goes to the log only.
		m.ready.add("redis", func(ctx context.Context) error {
			if err := c.Ready(ctx); err != nil {
				m.Logger.WarnContext(ctx, "readiness: redis unreachable", "err", err)
				return errors.New("unreachable; the cache is bypassed (see the log)")
			}
			return nil
		})
	}
	return c, nil
}

// openRedis connects to Redis when it is configured: one client for the write
// journal, the cache and the change feed, with the cache's timeout as every
// timeout, closed after all three (closers run last first). It comes before the
// directory, whose LDAP adapter takes the write journal when it is opened.
func (m *Main) openRedis() error {
	rcfg := m.redisConfig()
	if !rcfg.Configured() {
		return nil
	}
	rcfg.Metrics, rcfg.Logger = true, m.Logger
	timeout := m.Config.Cache.Timeout
	if timeout == 0 {
		timeout = cache.DefaultTimeout
	}
	client, err := rcfg.Open(timeout)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	m.closers = append(m.closers, client.Close)
	m.redis = client
	return nil
}

// redisHistory is the one History of every Redis client of this process (the
// cache's and the session store's): a failover noticed on either is a change for both.
func (m *Main) redisHistory() *redisconn.History {
	if m.history == nil {
		m.history = redisconn.NewHistory(m.Logger)
	}
	return m.history
}

// redisConfig is the Redis deployment the write journal, the cache, the change feed
// and sign-in share, with the process's failover History and tracing.
func (m *Main) redisConfig() redisconn.Config {
	cfg := m.Config.Redis
	cfg.History = m.redisHistory()
	cfg.Tracing = m.telemetry != nil && m.telemetry.Tracing
	return cfg
}

// startFeed follows changes made in the directory itself (docs/cache.md): listings
// through the cache's tokens, callers' principals through tokens' expiry. With
// several domains each domain has a feed of its own, with its own position, reader
// and events under its own keys (the home domain's keys are those of one domain, so
// that adding domains keeps its position).
func (m *Main) startFeed(ctx context.Context, c *cache.Cache, tokens *tokenfile.File) error {
	if !m.Config.ChangeFeed || len(m.changes) == 0 {
		return nil
	}
	secret, err := m.readSecret()
	if err != nil {
		return err
	}
	// Every domain's events refresh the same callers' principals. A group's
	// members changed: any caller's groups (or their nesting) may have. Otherwise
	// only the changed objects themselves.
	onEvent := func(ev changefeed.Event) {
		changed := make(map[string]bool, len(ev.GUIDs))
		for _, g := range ev.GUIDs {
			changed[g] = true
		}
		tokens.Expire(func(p dirgate.Principal) bool { return ev.All || ev.Groups || changed[p.GUID] })
	}
	for i, src := range m.changes {
		cfg := m.Config.Feed
		cfg.Source, cfg.Cache, cfg.PerInstance, cfg.Redis, cfg.Secret, cfg.Logger = src.Source, c, m.changesPerInstance, m.redis, secret, m.Logger
		cfg.KeyPrefix, cfg.Timeout, cfg.RetryInterval = m.Config.Cache.KeyPrefix, m.Config.Cache.Timeout, m.Config.Cache.RetryInterval
		check := "changefeed"
		if len(m.changes) > 1 {
			cfg.Domain = src.Domain
			if i > 0 {
				cfg.KeyPrefix += "domain:" + src.Domain + ":"
				check += " " + src.Domain
			}
		}
		cfg.OnEvent = onEvent
		f, err := changefeed.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("change feed: %w", err)
		}
		if i == 0 {
			m.feed = f
		}
		m.feeds = append(m.feeds, f)
		m.closers = append(m.closers, f.Close) // before the cache's (closers run last first)
		// Reported, not gating: without the feed, entries still expire by their TTL.
		m.ready.add(check, f.Ready)
	}
	return nil
}
