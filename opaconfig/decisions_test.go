package opaconfig_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// logReceiver is a decision-log service: it takes OPA's uploads (gzip JSON
// arrays of events), or fails them while told to.
type logReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	fail     bool
	failures int
	events   []map[string]any
}

func newLogReceiver(t *testing.T) *logReceiver {
	r := &logReceiver{}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail {
			r.failures++
			http.Error(w, "receiver down", 503)
			return
		}
		if req.Method != "POST" || req.URL.Path != "/logs" || req.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("upload %s %s (Content-Encoding %q), want a gzip POST to /logs", req.Method, req.URL.Path, req.Header.Get("Content-Encoding"))
		}
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			t.Errorf("upload not gzip: %v", err)
			return
		}
		var evs []map[string]any
		if err := json.NewDecoder(gz).Decode(&evs); err != nil {
			t.Errorf("upload not a JSON array: %v", err)
			return
		}
		r.events = append(r.events, evs...)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *logReceiver) setFail(b bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = b
}

func (r *logReceiver) failed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures
}

func (r *logReceiver) received() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// logConfig adds a decision log to the receiver to a bundle configuration.
func logConfig(t *testing.T, cfg map[string]any, url string, bufferEvents int) map[string]any {
	cfg["services"].(map[string]any)["logs"] = service(t, url)
	cfg["decision_logs"] = map[string]any{
		"service": "logs",
		"reporting": map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1,
			"buffer_type": "event", "buffer_size_limit_events": bufferEvents},
	}
	return cfg
}

// maskedPolicy is policyFiles with OPA's mask policy, which erases the subject's
// DN from every event (mask_decision's default path).
func maskedPolicy(answer string) map[string]string {
	files := policyFiles(answer)
	files["system/log.rego"] = "package system.log\n\nmask contains \"/input/subject/dn\"\n"
	return files
}

func remove(t *testing.T, a *policy.Authorizer, n int) {
	t.Helper()
	for range n {
		// An allowed or denied removal is logged alike; the error is the denial.
		_ = a.AllowRemove(context.Background(), removal.Subject, removal.Group, *removal.Object)
	}
}

// TestDecisionEvents: every decision reaches the receiver as an OPA event with
// its decision_id, labels, path, input, result, timestamp and the bundle's
// revision, dirgate's own members in custom, masked both by OPA's mask policy and
// by DIRGATE_DECISION_LOG_MASK. While the receiver fails, the events wait in the
// buffer and are retried: every one arrives once it recovers.
func TestDecisionEvents(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", maskedPolicy("yes")))
	rcv := newLogReceiver(t)
	cfg := logConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir()), rcv.URL, 1000)
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, cfg), ID: "replica-1"},
		policy.Config{}, candidate.Config{}, "/input/group/dn")

	remove(t, g.a, 1)
	waitFor(t, "the first event", func() bool { return len(rcv.received()) == 1 })
	ev := rcv.received()[0]
	if id, _ := ev["decision_id"].(string); len(id) != 36 {
		t.Errorf("decision_id = %v", ev["decision_id"])
	}
	labels, _ := ev["labels"].(map[string]any)
	if labels["id"] != "replica-1" || labels["team"] != "security" || labels["version"] == nil {
		t.Errorf("labels = %v, want id, version and the file's labels", labels)
	}
	if ev["path"] != "dirgate/authz/allow" {
		t.Errorf("path = %v", ev["path"])
	}
	if ts, _ := ev["timestamp"].(string); ts == "" {
		t.Errorf("timestamp = %v", ev["timestamp"])
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	bundles, _ := ev["bundles"].(map[string]any)
	if b, _ := bundles["authz"].(map[string]any); b["revision"] != "r1" {
		t.Errorf("bundles = %v, want authz at revision r1", ev["bundles"])
	}
	input, _ := ev["input"].(map[string]any)
	subject, _ := input["subject"].(map[string]any)
	group, _ := input["group"].(map[string]any)
	if input["action"] != "remove" || subject["guid"] != "a1" {
		t.Errorf("input = %v", input)
	}
	if _, ok := subject["dn"]; ok {
		t.Errorf("input.subject.dn = %v: OPA's mask policy did not erase it", subject["dn"])
	}
	if _, ok := group["dn"]; ok {
		t.Errorf("input.group.dn = %v: DIRGATE_DECISION_LOG_MASK did not erase it", group["dn"])
	}
	if erased, _ := ev["erased"].([]any); !slices.Contains(erased, any("/input/subject/dn")) {
		t.Errorf("erased = %v, want OPA's mask recorded", ev["erased"])
	}
	if result, _ := ev["result"].(map[string]any); result["allowed"] != true {
		t.Errorf("result = %v, want the removal allowed", ev["result"])
	}
	custom, _ := ev["custom"].(map[string]any)
	if custom["revision"] != g.a.Revision() {
		t.Errorf("custom.revision = %v, want dirgate's revision %s", custom["revision"], g.a.Revision())
	}
	if erased, _ := custom["erased"].([]any); !slices.Contains(erased, any("/input/group/dn")) {
		t.Errorf("custom.erased = %v, want dirgate's mask recorded", custom["erased"])
	}

	// The receiver fails for a while: nothing is lost within the buffer's bound.
	rcv.setFail(true)
	remove(t, g.a, 20)
	waitFor(t, "two failed uploads", func() bool { return rcv.failed() >= 2 })
	rcv.setFail(false)
	waitFor(t, "every event after the recovery", func() bool { return len(rcv.received()) == 21 })
	ids := map[any]bool{}
	for _, ev := range rcv.received() {
		ids[ev["decision_id"]] = true
	}
	if len(ids) != 21 {
		t.Errorf("%d distinct decision ids among 21 events", len(ids))
	}
	if d := g.rt.Dropped(); d["buffer_full"] != 0 || d["queue_full"] != 0 {
		t.Errorf("dropped %v within the bound", d)
	}
}

// TestDecisionBufferBound: with the receiver failing, OPA's buffer keeps at most
// its bound (buffer_size_limit_events) and drops the oldest, counted; what was
// kept arrives after the recovery.
func TestDecisionBufferBound(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", policyFiles("yes")))
	rcv := newLogReceiver(t)
	rcv.setFail(true)
	const bound, n = 5, 60
	cfg := logConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir()), rcv.URL, bound)
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, cfg)}, policy.Config{}, candidate.Config{})
	remove(t, g.a, n)
	waitFor(t, "drops counted", func() bool { return g.rt.Dropped()["buffer_full"] > 0 })
	waitFor(t, "a failed upload", func() bool { return rcv.failed() >= 1 })
	rcv.setFail(false)
	waitFor(t, "the kept events", func() bool { return len(rcv.received()) > 0 })
	time.Sleep(2500 * time.Millisecond) // two more uploads: whatever is left arrives
	got, dropped := len(rcv.received()), g.rt.Dropped()["buffer_full"]
	if got >= n || int64(got)+dropped > n {
		t.Errorf("received %d and dropped %d of %d decisions (bound %d)", got, dropped, n, bound)
	}
	t.Logf("received %d, dropped %d of %d with a bound of %d events", got, dropped, n, bound)
}

// TestDecisionQueueBound: lines that find dirgate's queue to OPA's plugin full are
// dropped, never waited for, and counted (here before Attach starts the queue's
// reader, so that the queue stays full).
func TestDecisionQueueBound(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", policyFiles("yes")))
	rcv := newLogReceiver(t)
	cfg := logConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir()), rcv.URL, 100)
	rt, err := opaconfig.Open(context.Background(), opaconfig.Config{File: writeConfig(t, cfg), Logger: quietLogger(),
		StartWait: 30 * time.Second, DecisionQueue: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	sink := rt.DecisionSink()
	for i := range 5 {
		sink.LogDecision(context.Background(), event{ID: fmt.Sprintf("d%d", i), Path: "dirgate/authz/allow",
			Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Input: map[string]any{}, Result: map[string]any{}})
	}
	if got := rt.Dropped()["queue_full"]; got != 3 {
		t.Errorf("queue_full = %d, want 3 of 5 decisions with a queue of 2", got)
	}
	if err := rt.Attach(context.Background(), nopPolicy{}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queued events", func() bool { return len(rcv.received()) == 2 })
}

type nopPolicy struct{}

func (nopPolicy) Replace(context.Context, fs.FS) error { return nil }
func (nopPolicy) Refuse(context.Context, error)        {}

// event is a decision whose event is already built.
type event dirgate.DecisionEvent

func (e event) Event() dirgate.DecisionEvent { return dirgate.DecisionEvent(e) }
