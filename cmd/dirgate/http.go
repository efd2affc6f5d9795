package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/internal/lazyctx"
	"github.com/dirgate/dirgate/proxy"
	"github.com/dirgate/dirgate/telemetry"
)

// handler assembles the HTTP stack: tracing outside, then the request deadline, then
// the API with its operational endpoints mounted beside it.
func (m *Main) handler(auth dirgate.Authenticator, svc proxy.Service, bodies proxy.BodyLister, signIn *session.Service) (http.Handler, error) {
	basePath := m.Config.BasePath
	if basePath == "" {
		basePath = "/" // proxy's spelling of "no base path"
	}
	// /metrics is not among them: it has a listener of its own (operatorHandler).
	mounts := map[string]http.Handler{
		"/healthz": healthz,
		"/readyz":  m.ready,
	}
	dec := m.decisions
	if dec != nil {
		if err := addExplorer(mounts, basePath, signIn != nil); err != nil {
			return nil, err
		}
	}
	trusted, err := m.Config.trustedProxies()
	if err != nil {
		return nil, err
	}
	var clientAddr func(*http.Request) string
	if len(trusted) > 0 {
		clientAddr = proxy.ForwardedClientAddr(trusted)
	}
	var si proxy.SignIn // nil pointers must stay nil interfaces
	if signIn != nil {
		si = signIn
	}
	th, err := m.openThrottle()
	if err != nil {
		return nil, err
	}
	api, err := proxy.New(proxy.Config{
		ClientAddr:    clientAddr,
		BasePath:      basePath,
		Authenticator: auth,
		Service:       svc,
		Bodies:        bodies,
		SignIn:        si,
		Throttle:      th,
		Logger:        m.Logger,
		Mounts:        mounts,
		Decisions:     dec,
		Idle:          m.writeWaitingLines,
	})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	route := func(r *http.Request) string {
		path := proxy.RoutePath(r)
		if rt, ok := proxy.APIRoute(basePath, path); ok {
			return rt
		}
		if rt, ok := proxy.SignInRoute(basePath, path); ok {
			return rt
		}
		if rt, ok := proxy.DecisionsRoute(basePath, path); ok {
			return rt
		}
		return "unmatched"
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Lazily: a cached listing never waits on its deadline, and arming a timer per
		// request was a measurable part of its CPU (internal/lazyctx).
		ctx, cancel := lazyctx.WithTimeout(r.Context(), m.Config.RequestTimeout)
		defer cancel()
		api.ServeHTTP(w, r.WithContext(ctx))
	})
	srv := &telemetry.HTTPServer{
		Route:   route,
		Tracing: m.telemetry.Tracing,
		// Probes and scrapes every few seconds would drown the traces that matter.
		Skip: func(r *http.Request) bool { _, mounted := mounts[proxy.RoutePath(r)]; return mounted },
	}
	return hsts(srv.Handler(inner)), nil
}

// healthz is the liveness probe: 200 while the process serves HTTP.
var healthz = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

// operatorHandler serves DIRGATE_METRICS_LISTEN: /metrics, and the probes beside it
// for a monitoring system that reaches this port only. Anything else is 404.
func (m *Main) operatorHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.telemetry.Metrics)
	mux.Handle("GET /healthz", healthz)
	mux.Handle("GET /readyz", m.ready)
	return mux
}

// hstsValue is the Strict-Transport-Security header of every HTTPS answer: a year,
// the common choice for a host that serves HTTPS only. Neither includeSubDomains nor
// preload: dirgate speaks for its own host name, not for names beside or below it.
const hstsValue = "max-age=31536000"

// hsts adds Strict-Transport-Security to every answer sent over TLS (the API's,
// errors, the probes', the explorer's), never to one over plain HTTP, where RFC 6797
// says a browser must ignore it. Behind an ingress that terminates TLS dirgate sees
// plain HTTP: the ingress sends the header.
func hsts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		h.ServeHTTP(w, r)
	})
}

// readiness is /readyz: a server that answers is ready, and the body reports each
// check's outcome. No check makes it 503: the upstream, Redis and the policy are
// shared by every replica, so failing readiness on them would empty the Service at
// once and turn dirgate's own 503s and stale cached answers into refused connections.
// A stopping server closes its listener; the manifests' preStop pause covers the gap.
type readiness struct {
	mu     sync.Mutex
	checks map[string]func(context.Context) error
}

func (rd *readiness) add(name string, check func(context.Context) error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.checks == nil {
		rd.checks = map[string]func(context.Context) error{}
	}
	rd.checks[name] = check
}

// ServeHTTP answers 200 with each check's outcome:
// {"status":"ready","checks":{"policy":"ok","upstream":"circuit breaker open"}}.
func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	rd.mu.Lock()
	names := make([]string, 0, len(rd.checks))
	for n := range rd.checks {
		names = append(names, n)
	}
	checks := rd.checks
	rd.mu.Unlock()
	sort.Strings(names)
	body := struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}{Status: "ready", Checks: map[string]string{}}
	for _, n := range names {
		if err := checks[n](ctx); err != nil {
			body.Checks[n] = err.Error()
		} else {
			body.Checks[n] = "ok"
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(body)
}
