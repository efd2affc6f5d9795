package policy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// openBench opens a policy directory as the gateway would run it: decision log on,
// with the default bound on denied GUIDs, written to a discarding writer.
func openBench(b *testing.B, modules map[string]string, data map[string]any) *policy.Authorizer {
	a, _ := policytest.OpenDir(b, modules, data)
	dir := a.Status().Source
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: policytest.QuietLogger(), DecisionLog: policytest.LineLog(io.Discard)})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkFilterView measures a listing request's authorization: "warm" is a
// caller whose predicate is cached deciding every object, "repeat" the same caller
// listing the same cached listing again (decisions reused), "cold" a new caller on
// every request (partial evaluation and translation included).
func BenchmarkFilterView(b *testing.B) {
	org := policytest.NewBenchOrg()
	a := openBench(b, policytest.BundledModules(b), org.Data)
	ctx := context.Background()
	callers := 0 // every cold request is a caller never seen before
	for _, n := range []int{1000, 10000} {
		objs := org.Objects(n)
		b.Run(fmt.Sprintf("objects=%d/warm", n), func(b *testing.B) {
			got, err := a.FilterView(ctx, org.Caller, org.Group, dirgate.ListOptions{}, objs)
			if err != nil || len(got) == 0 || len(got) == n {
				b.Fatalf("%d of %d visible, err %v: the benchmark must filter", len(got), n, err)
			}
			// More listings with the same objects in turn than a plan remembers: every
			// request decides every object.
			lists := make([][]dirgate.Object, 16) // a plan remembers 8
			for j := range lists {
				lists[j] = append([]dirgate.Object(nil), objs...)
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := a.FilterView(ctx, org.Caller, org.Group, dirgate.ListOptions{}, lists[i%len(lists)]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/repeat", n), func(b *testing.B) {
			// The same cached listing again: the previous decisions are reused.
			for b.Loop() {
				if _, err := a.FilterView(ctx, org.Caller, org.Group, dirgate.ListOptions{}, objs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/cold", n), func(b *testing.B) {
			caller := org.Caller
			for b.Loop() {
				callers++
				caller.GUID = fmt.Sprintf("%08d-9999-0000-0000-000000000000", callers)
				if _, err := a.FilterView(ctx, caller, org.Group, dirgate.ListOptions{}, objs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFilterViewRego is the same listing (1,000 objects, warm) decided by the
// fallbacks: "residual", the residual evaluated in Rego per object (a rule reads
// properties, which the translator leaves to Rego); "batch", one Rego evaluation of
// the whole policy over the listing (the policy calls a non-deterministic builtin,
// which rules out cached residuals).
func BenchmarkFilterViewRego(b *testing.B) {
	org := policytest.NewBenchOrg()
	objs := org.Objects(1000)
	for _, bc := range []struct{ name, file, src string }{
		{"residual", "reviewers.rego", "package dirgate.authz\nallow if \"reviewer\" in input.object.properties.role\n"},
		{"batch", "clock.rego", "package dirgate.authz\nclock_ok if time.now_ns() > 0\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			modules := policytest.BundledModules(b)
			modules[bc.file] = bc.src
			a := openBench(b, modules, org.Data)
			for b.Loop() {
				if _, err := a.FilterView(context.Background(), org.Caller, org.Group, dirgate.ListOptions{}, objs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPerObjectEval is the meaning the engine keeps, at its naive cost: one
// evaluation of the prepared decision query per object (1,000 objects).
func BenchmarkPerObjectEval(b *testing.B) {
	org := policytest.NewBenchOrg()
	ref := policytest.NewReference(b, policytest.BundledModules(b), org.Data)
	objs := org.Objects(1000)
	for b.Loop() {
		for i := range objs {
			ref.Allow(b, policy.Input{Action: policy.ActionView, Subject: org.Caller, Object: &objs[i], Group: org.Group,
				Request: policy.Request{Properties: []string{}}})
		}
	}
}

// TestBenchOrgMatchesEvaluation keeps the benchmark honest: on its organisation the
// engine decides as per-object evaluation does, through the predicate.
func TestBenchOrgMatchesEvaluation(t *testing.T) {
	org := policytest.NewBenchOrg()
	a, log := policytest.OpenDir(t, policytest.BundledModules(t), org.Data)
	compare(t, a, policytest.NewReference(t, policytest.BundledModules(t), org.Data), org.Caller, org.Group, dirgate.ListOptions{}, org.Objects(150))
	if m := policytest.Modes(t, log); m["predicate"] != 1 {
		t.Errorf("engine modes %v, want the predicate", m)
	}
}

// BenchmarkPropertyListing measures a listing of 1,000 objects asking for four
// properties (one of them secret), under the bundled policy with its property rule
// ("rule": every allowed object's set decided by the caller's translated plan) and
// without it ("no-rule": the built-in secret list only), against the same listing
// without properties ("none"), and asking for its three public properties only
// ("public": nothing is withheld). "repeat" lists the same cached listing again,
// whose view decisions (and property outcome) are remembered; "repeat-select"
// does so as MemberService.Select does: SelectView, then FilterView when it answers
// dirgate.ErrPropertiesWithheld.
func BenchmarkPropertyListing(b *testing.B) {
	org := policytest.NewBenchOrg()
	withRule := policytest.BundledModules(b)
	src := withRule["authz.rego"]
	start := strings.Index(src, "properties contains")
	end := strings.Index(src, "# granted is the set")
	if start < 0 || end < start {
		b.Fatal("the bundled policy's property rule moved")
	}
	noRule := map[string]string{"authz.rego": src[:start] + src[end:]}
	objs := org.Objects(1000)
	for i := range objs {
		objs[i].Properties = map[string][]string{"mail": {fmt.Sprintf("o%d@corp.example.com", i)}, "department": {"IT"},
			"title": {"Engineer"}, "ms-mcs-admpwd": {"secret"}}
	}
	props := []string{"department", "mail", "ms-mcs-admpwd", "title"}
	public := make([]dirgate.Object, len(objs)) // a listing carries the properties asked for
	for i, o := range objs {
		o.Properties = map[string][]string{"mail": o.Properties["mail"], "department": {"IT"}, "title": {"Engineer"}}
		public[i] = o
	}
	ctx := context.Background()
	for _, pol := range []struct {
		name    string
		modules map[string]string
	}{{"rule", withRule}, {"no-rule", noRule}} {
		a := openBench(b, pol.modules, org.Data)
		for _, opts := range []struct {
			name string
			opts dirgate.ListOptions
			objs []dirgate.Object
		}{{"none", dirgate.ListOptions{}, objs}, {"properties", dirgate.ListOptions{Properties: props}, objs},
			{"public", dirgate.ListOptions{Properties: []string{"department", "mail", "title"}}, public}} {
			objs := opts.objs
			b.Run(pol.name+"/"+opts.name+"/warm", func(b *testing.B) {
				lists := make([][]dirgate.Object, 16) // more than a plan remembers: every object decided
				for j := range lists {
					lists[j] = append([]dirgate.Object(nil), objs...)
				}
				i := 0
				for b.Loop() {
					i++
					if _, err := a.FilterView(ctx, org.Caller, org.Group, opts.opts, lists[i%len(lists)]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(pol.name+"/"+opts.name+"/repeat", func(b *testing.B) {
				for b.Loop() {
					if _, err := a.FilterView(ctx, org.Caller, org.Group, opts.opts, objs); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(pol.name+"/"+opts.name+"/repeat-select", func(b *testing.B) {
				for b.Loop() {
					_, err := a.SelectView(ctx, org.Caller, org.Group, opts.opts, objs, opts.opts.SizeLimit)
					if errors.Is(err, dirgate.ErrPropertiesWithheld) {
						_, err = a.FilterView(ctx, org.Caller, org.Group, opts.opts, objs)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
