package opaconfig

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"

	"github.com/dirgate/dirgate"
)

// DefaultDecisionQueue is Config.DecisionQueue's default: decisions waiting to
// become OPA events.
const DefaultDecisionQueue = 1024

// decisionWriter hands dirgate's decisions (package policy/decisionlog's typed
// events, already masked by DIRGATE_DECISION_LOG_MASK, built here off the
// request) to OPA's decision-log plugin, which applies mask_decision and drop_decision, buffers, batches and
// uploads them. A request never waits for it: LogDecision only queues, and a
// decision that finds the queue full is dropped and counted.
type decisionWriter struct {
	plugin  *logs.Plugin
	bundles func() map[string]server.BundleInfo
	logger  *slog.Logger
	queue   chan dirgate.DecisionRecord
	dropped atomic.Int64

	startOnce sync.Once
	closeOnce sync.Once
	// mu guards closed: a decision logged after close is dropped, not sent on the
	// closed queue.
	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

var _ dirgate.DecisionSink = (*decisionWriter)(nil)

func newDecisionWriter(p *logs.Plugin, bundles func() map[string]server.BundleInfo, size int, logger *slog.Logger) *decisionWriter {
	if size <= 0 {
		size = DefaultDecisionQueue
	}
	return &decisionWriter{plugin: p, bundles: bundles, logger: logger, queue: make(chan dirgate.DecisionRecord, size), done: make(chan struct{})}
}

// LogDecision queues d; its event is built when it leaves the queue.
func (w *decisionWriter) LogDecision(_ context.Context, d dirgate.DecisionRecord) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	select {
	case w.queue <- d:
	default:
		w.dropped.Add(1)
	}
}

func (w *decisionWriter) start(ctx context.Context) {
	w.startOnce.Do(func() { go w.run(ctx) })
}

func (w *decisionWriter) run(ctx context.Context) {
	defer close(w.done)
	for d := range w.queue {
		if err := w.log(ctx, d.Event()); err != nil {
			w.logger.Error("opa decision log: event not logged", "err", err)
		}
	}
}

// close lets the queued decisions reach OPA's buffer (which flushes them when
// its plugin stops) within ctx.
func (w *decisionWriter) close(ctx context.Context) {
	w.closeOnce.Do(func() {
		w.startOnce.Do(func() { close(w.done) }) // never started: nothing to wait for
		w.mu.Lock()
		w.closed = true
		close(w.queue)
		w.mu.Unlock()
	})
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// log hands e to OPA's plugin; the members OPA's event has no place for
// (engine, candidate, duration_ms, erased, revision) travel in its "custom".
func (w *decisionWriter) log(ctx context.Context, e dirgate.DecisionEvent) error {
	return w.plugin.Log(ctx, &server.Info{
		DecisionID: e.ID,
		Path:       e.Path,
		Timestamp:  e.Time,
		TraceID:    e.TraceID,
		SpanID:     e.SpanID,
		Input:      &e.Input,
		Results:    &e.Result,
		Bundles:    w.bundles(),
		Custom:     e.Custom,
	})
}
