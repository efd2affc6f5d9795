package main

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"github.com/dirgate/dirgate/redisconn"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/auth/tokenfile"
	"github.com/dirgate/dirgate/changefeed"
	"github.com/dirgate/dirgate/internal/heapreturn"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/render"
	"github.com/dirgate/dirgate/telemetry"
	"github.com/dirgate/dirgate/upstream/domains"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

//go:embed demo-tokens.yaml
var demoTokens []byte

// Main is the running program: Run wires and starts it, Close stops it gracefully.
// End-to-end tests start it on port 0.
type Main struct {
	Config *Config
	Logger *slog.Logger
	stdout io.Writer
	stderr io.Writer

	ln     net.Listener
	scheme string // http, or https with a certificate
	srv    *http.Server

	// metricsLn and metricsSrv serve /metrics apart from the API (nil: off).
	metricsLn  net.Listener
	metricsSrv *http.Server

	cancel context.CancelFunc
	// requests is the context of every request; see BaseContext.
	requests       context.Context
	cancelRequests context.CancelFunc
	closers        []func() error
	lineWriters    []lineDest // flushed last by Close
	served         chan error
	telemetry      *telemetry.Telemetry
	ready          *readiness
	// changes are the upstream's change sources (none: no feed), one per domain with
	// several domains (each named); changesPerInstance says that every instance
	// reads its own (the memory upstream's file). feeds run them, the home domain's
	// (or the only one's) first, which is feed.
	changes            []domains.DomainChanges
	changesPerInstance bool
	// forestOfSeveral says that a domain served is in a forest of several domains:
	// the in-chain matching rule does not see members held by the forest's other
	// domains, so it is not used (openCache).
	forestOfSeveral bool
	feed            *changefeed.Feed
	feeds           []*changefeed.Feed
	// redis is the client the write journal, the cache and the change feed share
	// (nil without Redis; openRedis).
	redis redis.UniversalClient
	// history notices Redis failovers for every Redis client (redisHistory).
	history *redisconn.History
	// checker checks sign-in passwords: the upstream itself, outside the circuit
	// breaker (a wrong password is no upstream failure). nil: no sign-in.
	checker dirgate.CredentialChecker
	// signInPolicy is the policy's optional sign-in rule (set by openPolicy).
	signInPolicy session.SignInPolicy
	// decisions is the decisions API over the policy (set by openPolicy).
	decisions proxy.Decisions
	// schema names the directory's confidential and DN-valued attributes, for the property
	// policy (set by openDirectory: the LDAP upstream reads its schema, the memory
	// upstream finds the attributes naming its entries).
	schema dirgate.PropertySchema
	// signInFailures counts failed sign-ins across replicas (with Redis).
	signInFailures *session.RedisFailures
	// secret is DIRGATE_SECRET_FILE's content, read once (readSecret).
	secret []byte

	// Test hooks: wrapDirectory decorates the directory (to slow it down);
	// wrapChanges decorates the change feed's source (to count its reads);
	// spanExporter receives the spans; getenv replaces os.Getenv for OTEL_*;
	// onCertReload is told each TLS certificate reload's outcome.
	wrapDirectory func(dirgate.Directory) dirgate.Directory
	wrapChanges   func(dirgate.ChangeSource) dirgate.ChangeSource
	spanExporter  sdktrace.SpanExporter
	getenv        func(string) string
	onCertReload  func(error)
}

// NewMain returns a program for cfg that logs to stderr, lines batched for up to
// cfg.LogFlush (docs/operations.md, "Logs"); Close writes the last ones.
func NewMain(cfg *Config, stdout, stderr io.Writer) *Main {
	m := &Main{Config: cfg, stdout: stdout, stderr: stderr}
	logOut := m.lines(stderr)
	opts := &slog.HandlerOptions{Level: cfg.slogLevel()}
	var h slog.Handler = slog.NewJSONHandler(logOut, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(logOut, opts)
	}
	m.Logger = slog.New(telemetry.LogHandler(h))
	return m
}

// lines returns the batching writer of w, one per destination so that the request
// log and a decision log on the same stream share batches and never interleave
// within a line.
func (m *Main) lines(w io.Writer) *telemetry.LineWriter {
	for _, lw := range m.lineWriters {
		// (== on an interface holding an uncomparable value would panic.)
		if reflect.TypeOf(w).Comparable() && reflect.TypeOf(lw.dest) == reflect.TypeOf(w) && lw.dest == w {
			return lw.w
		}
	}
	lw := telemetry.NewLineWriter(w, m.Config.LogFlush)
	m.lineWriters = append(m.lineWriters, lineDest{dest: w, w: lw})
	return lw
}

// writeWaitingLines writes the lines batched so far, when no request is in flight
// (proxy.Config.Idle).
func (m *Main) writeWaitingLines() {
	for _, lw := range m.lineWriters {
		lw.w.WriteWaiting()
	}
}

type lineDest struct {
	dest io.Writer
	w    *telemetry.LineWriter
}

// Run opens the directory, loads the tokens and starts serving. It returns once the
// listener is open; Addr then tells where.
func (m *Main) Run(ctx context.Context) error {
	ctx, m.cancel = context.WithCancel(ctx)
	var err error
	m.telemetry, err = telemetry.Setup(ctx, telemetry.Options{Version: version, SpanExporter: m.spanExporter, Getenv: m.getenv})
	if err != nil {
		return err
	}
	m.closers = append(m.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return m.telemetry.Shutdown(ctx)
	})
	m.ready = &readiness{}
	if n := m.Config.MemoryReturnGarbage; n > 0 {
		// A large fill's garbage is handed back soon, not kept until the heap doubles
		// (docs/operations.md, "Memory").
		hr := heapreturn.Start(ctx, heapreturn.Config{MinGarbage: uint64(n), Logger: m.Logger})
		m.closers = append(m.closers, func() error { hr.Close(); return nil })
	}

	if err := m.openRedis(); err != nil {
		return err
	}
	dir, err := m.openDirectory(ctx)
	if err != nil {
		return err
	}
	if m.wrapDirectory != nil {
		dir = m.wrapDirectory(dir)
	}
	if m.wrapChanges != nil {
		for i := range m.changes {
			m.changes[i].Source = m.wrapChanges(m.changes[i].Source)
		}
	}
	cached, err := m.openCache(ctx, dir)
	if err != nil {
		return err
	}
	svc := &dirgate.MemberService{Dir: cached, Listings: cached}
	// Rendered bodies are kept beside the decoded listings, in a quarter of their
	// bound (docs/cache.md, "Rendered bodies").
	bodies := render.NewLister(svc, render.NewBodyCache(m.Config.Cache.MaxBytes/4))

	if err := m.openPolicy(ctx, svc); err != nil {
		return err
	}

	tcfg := tokenfile.Config{Path: m.Config.TokensFile, Resolver: svc, PrincipalTTL: m.Config.PrincipalTTL,
		PrincipalMaxStale: m.Config.Cache.MaxStale, Logger: m.Logger}
	if m.Config.IsDemo() {
		tcfg.Path, tcfg.Data = "embedded demo tokens", demoTokens
	}
	tokens, err := tokenfile.Open(tcfg)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if !m.Config.IsDemo() {
		if err := tokens.Watch(ctx, nil); err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
	}
	if err := m.startFeed(ctx, cached, tokens); err != nil {
		return err
	}

	var auth dirgate.Authenticator = tokens
	signIn, err := m.openSignIn(ctx, tokens)
	if err != nil {
		return err
	}
	if signIn != nil {
		auth = signIn
	}
	handler, err := m.handler(auth, svc, bodies, signIn)
	if err != nil {
		return err
	}
	m.ln, err = net.Listen("tcp", m.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	m.scheme = "http"
	var tlsConfig *tls.Config
	if m.Config.TLSCertFile != "" {
		certs, err := newCertReloader(m.Config.TLSCertFile, m.Config.TLSKeyFile, m.Logger)
		if err != nil {
			m.ln.Close()
			return err
		}
		certs.onReload = m.onCertReload
		if err := certs.watch(ctx); err != nil {
			m.ln.Close()
			return err
		}
		reg, err := certs.registerMetrics()
		if err != nil {
			m.ln.Close()
			return err
		}
		m.closers = append(m.closers, reg.Unregister)
		tlsConfig = certs.config()
		m.ln, m.scheme = tls.NewListener(m.ln, tlsConfig), "https"
	}
	if err := m.listenMetrics(tlsConfig); err != nil {
		m.ln.Close()
		return err
	}
	m.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// A backstop: the handler bounds a body more tightly (proxy.DefaultBodyReadTimeout).
		ReadTimeout:    time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
		// Requests must outlive the signal that starts a graceful shutdown: their
		// context is cancelled only once Shutdown has given up waiting for them.
		BaseContext: func(net.Listener) context.Context { return m.requests },
	}
	m.requests, m.cancelRequests = context.WithCancel(context.WithoutCancel(ctx))
	m.served = make(chan error, 1)
	go func() { m.served <- m.srv.Serve(m.ln) }()
	metricsAddr := "off"
	if m.metricsSrv != nil {
		metricsAddr = m.MetricsAddr()
		go func(srv *http.Server, ln net.Listener) {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.Logger.Error("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
			}
		}(m.metricsSrv, m.metricsLn)
	}
	m.Logger.Info("dirgate serving", "version", version, "addr", m.Addr(), "metrics_addr", metricsAddr, "scheme", m.scheme,
		"base_path", m.Config.BasePath, "upstream", m.Config.Upstream, "tracing", m.telemetry.Tracing)
	if m.Config.IsDemo() {
		m.printDemo()
	}
	return nil
}

// Addr returns the address the server listens on.
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// MetricsAddr returns the address /metrics is served on ("" when it is off).
func (m *Main) MetricsAddr() string {
	if m.metricsLn == nil {
		return ""
	}
	return m.metricsLn.Addr().String()
}

// listenMetrics opens DIRGATE_METRICS_LISTEN, unless it is off, with the API's TLS
// configuration when it has one. Metrics are served apart from the API so that the
// network can keep them from the API's callers (deploy/kubernetes/networkpolicy.yaml):
// they are the operators', and docs/operations.md says what each series can reveal.
func (m *Main) listenMetrics(tlsConfig *tls.Config) error {
	if m.Config.MetricsListen == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", m.Config.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	m.metricsLn = ln
	m.metricsSrv = &http.Server{
		Handler:           hsts(m.operatorHandler()),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
	}
	return nil
}

// Close stops accepting requests, lets in-flight ones finish within the shutdown
// timeout, then releases the adapters.
func (m *Main) Close() error {
	var errs []error
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
		defer cancel()
		if err := m.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
		m.cancelRequests()
		if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		m.srv = nil
	}
	if m.metricsSrv != nil {
		// Scrapes are short: the API's in-flight requests had the shutdown timeout.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := m.metricsSrv.Shutdown(ctx); err != nil {
			m.metricsSrv.Close()
		}
		m.metricsSrv = nil
	}
	if m.cancel != nil {
		m.cancel()
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	m.closers = nil
	for _, lw := range m.lineWriters {
		if err := lw.w.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("write logs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// printDemo tells a newcomer how to talk to the demo gateway.
func (m *Main) printDemo() {
	base := m.scheme + "://" + m.Addr() + m.Config.BasePath + "/api/directoryObjects/groupMembers"
	group := url.QueryEscape("CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com")
	fmt.Fprintf(m.stdout, `
dirgate is serving the embedded demo directory at %s
Demo tokens (plain text, development only):
  demo-admin     acts as CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com
  demo-helpdesk  acts as CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com
Try:
  curl -s -H 'Adm-Authorization: demo-admin' '%s?group=%s&includeIndirect=true'
`, base, base, group)
	if a := m.MetricsAddr(); a != "" {
		fmt.Fprintf(m.stdout, "Metrics (Prometheus): %s://%s/metrics\n", m.scheme, a)
	}
	if m.checker == nil || !m.Config.SignIn {
		fmt.Fprintln(m.stdout)
		return
	}
	root := m.scheme + "://" + m.Addr() + m.Config.BasePath
	fmt.Fprintf(m.stdout, `Demo sign-in (development only): dana.admin@corp.example.com / %s, hugo.helpdesk@corp.example.com / %s
  SESSION=$(curl -s -H 'Content-Type: application/json' -d '{"username":"CORP\\dana.admin","password":"%s"}' %s/api/authSessions/create | jq -r .sessionId)
  TOKEN=$(curl -s -H 'Content-Type: application/json' -d "{\"sessionId\":\"$SESSION\"}" %s/api/auth | jq -r .token)
  curl -s -H "Adm-Authorization: $TOKEN" '%s?group=%s'

`, demoPasswords["dana.admin"], demoPasswords["hugo.helpdesk"], demoPasswords["dana.admin"], root, root, base, group)
}
