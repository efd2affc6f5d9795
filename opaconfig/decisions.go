package opaconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
)

// DefaultDecisionQueue is Config.DecisionQueue's default: writes of decision lines
// (one or more lines each) waiting to become OPA events.
const DefaultDecisionQueue = 1024

// decisionWriter turns dirgate's decision lines (policy's decision log, already
// masked by DIRGATE_DECISION_LOG_MASK) into OPA decision events and hands them
// to OPA's decision-log plugin, which applies mask_decision and drop_decision,
// buffers, batches and uploads them. A request never waits for it: Write only
// queues, and a write that finds the queue full is dropped and counted.
type decisionWriter struct {
	plugin  *logs.Plugin
	bundles func() map[string]server.BundleInfo
	logger  *slog.Logger
	queue   chan []byte
	dropped atomic.Int64

	startOnce sync.Once
	closeOnce sync.Once
	// mu guards closed: a line written after close is dropped, not sent on the
	// closed queue.
	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

func newDecisionWriter(p *logs.Plugin, bundles func() map[string]server.BundleInfo, size int, logger *slog.Logger) *decisionWriter {
	if size <= 0 {
		size = DefaultDecisionQueue
	}
	return &decisionWriter{plugin: p, bundles: bundles, logger: logger, queue: make(chan []byte, size), done: make(chan struct{})}
}

// Write queues p, one or more whole lines.
func (w *decisionWriter) Write(p []byte) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(int64(max(bytes.Count(p, []byte{'\n'}), 1)))
		return len(p), nil
	}
	select {
	case w.queue <- bytes.Clone(p):
	default:
		w.dropped.Add(int64(max(bytes.Count(p, []byte{'\n'}), 1)))
	}
	return len(p), nil
}

func (w *decisionWriter) start(ctx context.Context) {
	w.startOnce.Do(func() { go w.run(ctx) })
}

func (w *decisionWriter) run(ctx context.Context) {
	defer close(w.done)
	for b := range w.queue {
		for line := range bytes.Lines(b) {
			if err := w.log(ctx, line); err != nil {
				w.logger.Error("opa decision log: event not logged", "err", err)
			}
		}
	}
}

// close lets the queued lines reach OPA's buffer (which flushes them when its
// plugin stops) within ctx.
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

// line is a decision line's members that OPA's event has a place for; the others
// (engine, candidate, duration_ms, erased, revision) travel in its "custom".
type line struct {
	DecisionID string    `json:"decision_id"`
	Path       string    `json:"path"`
	Time       time.Time `json:"time"`
	TraceID    string    `json:"trace_id"`
	SpanID     string    `json:"span_id"`
	Input      any       `json:"input"`
	Result     any       `json:"result"`
}

var eventMembers = map[string]bool{"decision_id": true, "path": true, "time": true, "trace_id": true,
	"span_id": true, "input": true, "result": true}

func (w *decisionWriter) log(ctx context.Context, b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	custom := map[string]any{}
	for k, v := range all {
		if !eventMembers[k] {
			custom[k] = v
		}
	}
	return w.plugin.Log(ctx, &server.Info{
		DecisionID: l.DecisionID,
		Path:       l.Path,
		Timestamp:  l.Time,
		TraceID:    l.TraceID,
		SpanID:     l.SpanID,
		Input:      &l.Input,
		Results:    &l.Result,
		Bundles:    w.bundles(),
		Custom:     custom,
	})
}
