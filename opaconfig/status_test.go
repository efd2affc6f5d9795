package opaconfig_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// TestStatusReports: with "status", OPA's status plugin reports the bundles'
// state, labels included, to its service.
func TestStatusReports(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", policyFiles("yes")))
	var mu sync.Mutex
	var reports []map[string]any
	status := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep map[string]any
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			t.Errorf("status report: %v", err)
			return
		}
		mu.Lock()
		reports = append(reports, rep)
		mu.Unlock()
	}))
	t.Cleanup(status.Close)
	cfg := bundleConfig(t, srv.URL, &s, t.TempDir())
	cfg["services"].(map[string]any)["status"] = service(t, status.URL)
	cfg["status"] = map[string]any{"service": "status"}
	openGateway(t, opaconfig.Config{File: writeConfig(t, cfg)}, policy.Config{}, candidate.Config{})
	waitFor(t, "a status report naming r1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, rep := range reports {
			b, _ := rep["bundles"].(map[string]any)
			a, _ := b["authz"].(map[string]any)
			l, _ := rep["labels"].(map[string]any)
			if a["active_revision"] == "r1" && l["team"] == "security" {
				return true
			}
		}
		return false
	})
}

// TestCloseSendsBufferedDecisions: decisions still buffered when dirgate stops
// are sent before Close returns (within its deadline), however long the upload
// interval.
func TestCloseSendsBufferedDecisions(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", policyFiles("yes")))
	rcv := newLogReceiver(t)
	cfg := logConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir()), rcv.URL, 100)
	cfg["decision_logs"].(map[string]any)["reporting"] = map[string]any{"min_delay_seconds": 300, "max_delay_seconds": 600}
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, cfg)}, policy.Config{}, candidate.Config{})
	remove(t, g.a, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rcv.received()); n != 7 {
		t.Errorf("%d of 7 decisions sent at Close", n)
	}
}
