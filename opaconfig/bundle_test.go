package opaconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/decisionlog"
)

// policyFiles is a policy whose decision follows data.answer, so that each
// bundle's revision shows in the decision.
func policyFiles(answer string) map[string]string {
	return map[string]string{
		"dirgate/authz.rego": "package dirgate.authz\n\nallow if data.answer == \"yes\"\n",
		"data.json":          `{"answer": "` + answer + `"}`,
	}
}

var removal = policy.Input{Action: policy.ActionRemove,
	Subject: dirgate.Principal{DN: "CN=Alice,DC=example,DC=com", GUID: "a1"},
	Group:   dirgate.Object{DN: "CN=Group,DC=example,DC=com", GUID: "g1"},
	Object:  &dirgate.Object{DN: "CN=Bob,DC=example,DC=com", GUID: "b1"}}

func allows(t *testing.T, a *policy.Authorizer) bool {
	t.Helper()
	d, err := a.Decide(context.Background(), removal)
	if err != nil {
		t.Fatal(err)
	}
	return d.Allow
}

// reloads reads dirgate_policy_reloads{outcome} summed over every Authorizer.
func reloads(t *testing.T, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dirgate_policy_reloads" {
				for _, p := range s.DataPoints {
					if v, ok := p.Attributes.Value(attribute.Key("outcome")); ok && v.AsString() == outcome {
						n += p.Value
					}
				}
			}
		}
	}
	return n
}

// bundleConfig is an OPA configuration with one bundle "authz" at the service,
// polled every second, signed with s's key when s is set, persisted in dir.
func bundleConfig(t *testing.T, url string, s *signer, persistDir string) map[string]any {
	b := map[string]any{
		"service":  "acme",
		"resource": "bundles/authz.tar.gz",
		"persist":  true,
		"polling":  map[string]any{"min_delay_seconds": 1, "max_delay_seconds": 1},
	}
	cfg := map[string]any{
		"services":              map[string]any{"acme": service(t, url)},
		"bundles":               map[string]any{"authz": b},
		"persistence_directory": persistDir,
		"labels":                map[string]any{"team": "security"},
	}
	if s != nil {
		b["signing"] = map[string]any{"keyid": "ci"}
		cfg["keys"] = map[string]any{"ci": map[string]any{"algorithm": "RS256", "key": s.pub}}
	}
	return cfg
}

// gateway is a Runtime feeding a policy.Authorizer, as cmd/dirgate wires them.
type gateway struct {
	rt   *opaconfig.Runtime
	a    *policy.Authorizer
	cand *candidate.Candidate // nil without a candidate bundle
}

// openGateway opens the Runtime of cfg and an Authorizer of pcfg fed by it, whose
// decisions go to the Runtime's decision-log service (when the file names one),
// masked by mask as DIRGATE_DECISION_LOG_MASK masks them.
// A candidate bundle (cfg.Candidate) is decided in shadow with ccfg's settings.
func openGateway(t *testing.T, cfg opaconfig.Config, pcfg policy.Config, ccfg candidate.Config, mask ...string) *gateway {
	t.Helper()
	ctx := context.Background()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.StartWait == 0 {
		cfg.StartWait = 30 * time.Second
	}
	rt, err := opaconfig.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.Files, pcfg.Source, pcfg.Logger = rt.Files(), rt.Source(), quietLogger()
	if sink := rt.DecisionSink(); pcfg.DecisionLog == nil && sink != nil {
		dlog, err := decisionlog.New(decisionlog.Config{Sink: sink, Mask: mask, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		pcfg.DecisionLog = dlog
	}
	var fed opaconfig.Policy
	var cand *candidate.Candidate
	if cfg.Candidate != "" {
		ccfg.Files, ccfg.Source, ccfg.Logger = rt.CandidateFiles(), rt.CandidateSource(), quietLogger()
		if cand, err = candidate.Open(ctx, ccfg); err != nil {
			rt.Close(ctx)
			t.Fatal(err)
		}
		pcfg.Shadow, fed = cand, cand
	}
	a, err := policy.Open(ctx, pcfg)
	if err != nil {
		rt.Close(ctx)
		t.Fatal(err)
	}
	if err := rt.Attach(ctx, a, fed); err != nil {
		t.Fatal(err)
	}
	g := &gateway{rt: rt, a: a, cand: cand}
	t.Cleanup(g.close)
	return g
}

func (g *gateway) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.rt.Close(ctx)
	g.a.Close()
}

// TestSignedBundles: the policy comes from a signed bundle made by opa build;
// a new revision is picked up; a tampered bundle, an unsigned one, a signed one
// that does not compile, a signed one calling http.send, garbage and a failing service are each refused with the
// last good policy kept in force, counted and reported by Ready (the instance
// stays ready: Ready is reported, not gating), until a good bundle loads again.
// Then, with the service down, a new instance starts from the persisted bundle.
func TestSignedBundles(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "r1", policyFiles("yes")))
	persist := t.TempDir()
	cfgFile := writeConfig(t, bundleConfig(t, srv.URL, &s, persist))
	g := openGateway(t, opaconfig.Config{File: cfgFile}, policy.Config{}, candidate.Config{})
	if !allows(t, g.a) {
		t.Fatal("revision r1 (answer yes) does not allow")
	}
	if src := g.a.Status().Source; !strings.Contains(src, "authz") {
		t.Errorf("Status().Source = %q, want the bundle named", src)
	}

	srv.put("/bundles/authz.tar.gz", build(t, &s, "r2", policyFiles("no")))
	waitFor(t, "revision r2", func() bool { return !allows(t, g.a) })
	good := g.a.Revision()
	if err := g.a.Ready(); err != nil {
		t.Fatalf("Ready after a good bundle: %v", err)
	}

	tampered := untar(t, build(t, &s, "r3", policyFiles("no")))
	tampered["data.json"] = `{"answer": "yes"}`
	unsignedCompiling := build(t, nil, "r4", policyFiles("yes"))
	uncompilable := policyFiles("yes")
	uncompilable["dirgate/authz.rego"] = "package dirgate.authz\n\nallow if unbound_var\n"
	uncompilable[".manifest"] = `{"revision": "r5"}`
	// Signed, compiling with every builtin, but reaching the network
	// (policy.PolicyCapabilities): refused by the policy's compiler.
	network := policyFiles("yes")
	network["dirgate/authz.rego"] = "package dirgate.authz\n\nallow if http.send({\"method\": \"get\", \"url\": \"https://127.0.0.1:1/\"}).status_code == 200\n"
	network[".manifest"] = `{"revision": "r6"}`
	for _, c := range []struct {
		name   string
		bundle []byte
		mode   string
		want   string // in the reported error
	}{
		{"tampered", tarball(t, tampered), "", "digest mismatch"},
		{"unsigned", unsignedCompiling, "", "signature"},
		{"uncompilable", signedTarball(t, s, uncompilable), "", "unbound_var"},
		{"http.send", signedTarball(t, s, network), "", "undefined function http.send"},
		{"garbage", nil, "garbage", "authz"},
		{"500", nil, "500", "500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			failed := reloads(t, "failed")
			if c.bundle != nil {
				srv.put("/bundles/authz.tar.gz", c.bundle)
			}
			srv.setMode(c.mode)
			waitFor(t, "the refusal", func() bool { return g.a.Ready() != nil })
			if allows(t, g.a) || g.a.Revision() != good {
				t.Errorf("revision %s in force, want the last good %s", g.a.Revision(), good)
			}
			if st := g.a.Status(); !strings.Contains(st.LastError, c.want) {
				t.Errorf("Status().LastError = %q, want it to mention %q", st.LastError, c.want)
			}
			if err := g.a.Ready(); !strings.Contains(err.Error(), good) {
				t.Errorf("Ready = %v, want the revision in force named", err)
			}
			if got := reloads(t, "failed"); got <= failed {
				t.Errorf("dirgate_policy_reloads{outcome=failed} = %d, was %d", got, failed)
			}
			// Back to a good bundle: the error clears.
			srv.setMode("")
			srv.put("/bundles/authz.tar.gz", build(t, &s, "r2", policyFiles("no")))
			waitFor(t, "recovery", func() bool { return g.a.Ready() == nil })
			if g.a.Revision() != good {
				t.Errorf("revision %s after recovery, want %s", g.a.Revision(), good)
			}
		})
	}

	// The service is gone: a new instance starts from the persisted bundle.
	g.close()
	srv.Close()
	down := bundleConfig(t, "https://"+freeAddr(t), &s, persist)
	g2 := openGateway(t, opaconfig.Config{File: writeConfig(t, down)}, policy.Config{}, candidate.Config{})
	if g2.a.Revision() != good {
		t.Errorf("started from disk with revision %s, want the persisted %s", g2.a.Revision(), good)
	}
	if _, err := os.Stat(filepath.Join(persist, "bundles", "authz", "bundle.tar.gz")); err != nil {
		t.Errorf("persisted bundle: %v", err)
	}

	// Without a persisted bundle and without the service, dirgate does not start.
	_, err := opaconfig.Open(context.Background(), opaconfig.Config{File: writeConfig(t, bundleConfig(t, "https://"+freeAddr(t), &s, t.TempDir())),
		Logger: quietLogger(), StartWait: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "authz") {
		t.Errorf("Open with the service down and nothing persisted: %v, want an error naming the bundle", err)
	}
}
