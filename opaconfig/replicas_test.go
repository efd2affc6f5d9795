package opaconfig_test

import (
	"testing"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// TestReplicasSwitchTogether: two gateways on one bundle service, polling every
// second, switch to a new revision on their first poll after it is published,
// so within one polling interval of each other. The service tells its clients
// apart by the resource each is configured with.
func TestReplicasSwitchTogether(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	r1 := build(t, &s, "r1", policyFiles("yes"))
	srv.put("/a/authz.tar.gz", r1)
	srv.put("/b/authz.tar.gz", r1)
	var gs []*gateway
	for _, res := range []string{"a/authz.tar.gz", "b/authz.tar.gz"} {
		cfg := bundleConfig(t, srv.URL, &s, t.TempDir())
		cfg["bundles"].(map[string]any)["authz"].(map[string]any)["resource"] = res
		gs = append(gs, openGateway(t, opaconfig.Config{File: writeConfig(t, cfg)}, policy.Config{}, candidate.Config{}))
	}
	old := gs[0].a.Revision()
	if gs[1].a.Revision() != old {
		t.Fatalf("replicas start at %s and %s", old, gs[1].a.Revision())
	}

	r2 := build(t, &s, "r2", policyFiles("no"))
	srv.mu.Lock()
	mark := len(srv.requests)
	srv.bundles["/a/authz.tar.gz"], srv.bundles["/b/authz.tar.gz"] = r2, r2
	srv.mu.Unlock()
	for _, g := range gs {
		waitFor(t, "the new revision", func() bool { return g.a.Revision() != old })
	}
	if gs[0].a.Revision() != gs[1].a.Revision() {
		t.Errorf("replicas at %s and %s", gs[0].a.Revision(), gs[1].a.Revision())
	}
	first := map[string]served{}
	for _, r := range srv.since(mark) {
		if _, ok := first[r.path]; !ok {
			first[r.path] = r
		}
	}
	for _, p := range []string{"/a/authz.tar.gz", "/b/authz.tar.gz"} {
		if r := first[p]; r.status != 200 || r.etag != etagOf(r2) {
			t.Errorf("%s: first poll after publication got %d %s, want the new bundle", p, r.status, r.etag)
		}
	}
}
