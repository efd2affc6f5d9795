package opaconfig_test

import (
	"strings"
	"testing"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// TestCandidateBundle: a second bundle of the file is the candidate, in a store
// of its own (both define data.dirgate.authz): it follows its service like the
// active policy, and a candidate bundle that is refused is reported by
// the candidate's Ready while the active policy stays ready.
func TestCandidateBundle(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	srv.put("/bundles/authz.tar.gz", build(t, &s, "a1", policyFiles("yes")))
	srv.put("/bundles/next.tar.gz", build(t, &s, "n1", policyFiles("no")))
	cfg := bundleConfig(t, srv.URL, &s, t.TempDir())
	bundles := cfg["bundles"].(map[string]any)
	next := map[string]any{}
	for k, v := range bundles["authz"].(map[string]any) {
		next[k] = v
	}
	next["resource"] = "bundles/next.tar.gz"
	bundles["next"] = next
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, cfg), Candidate: "next"}, policy.Config{}, candidate.Config{Sample: new(float64)})

	st := g.cand.Status()
	if !strings.Contains(st.Source, "next") || st.Revision == "" || st.Revision == g.a.Revision() {
		t.Fatalf("candidate %+v beside active %s", st, g.a.Revision())
	}
	if !strings.Contains(g.a.Status().Source, "authz") || strings.Contains(g.a.Status().Source, "next") {
		t.Errorf("active source %q, want authz alone", g.a.Status().Source)
	}
	first := st.Revision
	srv.put("/bundles/next.tar.gz", build(t, &s, "n2", policyFiles("maybe")))
	waitFor(t, "the candidate's new revision", func() bool { return g.cand.Status().Revision != first })
	second := g.cand.Status().Revision

	srv.put("/bundles/next.tar.gz", build(t, nil, "n3", policyFiles("yes")))
	waitFor(t, "the unsigned candidate refused", func() bool { return g.cand.Ready() != nil })
	if err := g.cand.Ready(); !strings.Contains(err.Error(), second) {
		t.Errorf("candidate Ready = %v, want the candidate in force (%s) named", err, second)
	}
	if g.cand.Status().Revision != second {
		t.Errorf("candidate revision %s, want the last good %s", g.cand.Status().Revision, second)
	}
	if err := g.a.Ready(); err != nil {
		t.Errorf("active policy not ready because of the candidate: %v", err)
	}
	if !allows(t, g.a) {
		t.Error("the active policy's answer changed with the candidate")
	}
}
