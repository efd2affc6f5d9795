package policy_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
	bundled "github.com/dirgate/dirgate/rego"
)

// compare decides a listing with the Authorizer and object by object with the
// reference, and reports every object on which they differ.
func compare(t *testing.T, a *policy.Authorizer, ref *policytest.Reference, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) {
	t.Helper()
	compareTimes(t, 1, a, ref, p, group, opts, objs)
}

// compareTimes asks the Authorizer n times (the first request builds the caller's
// predicate, the next ones reuse it) and the reference once.
func compareTimes(t *testing.T, n int, a *policy.Authorizer, ref *policytest.Reference, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) {
	t.Helper()
	var visibles []map[string]bool
	for range n {
		got, err := a.FilterView(context.Background(), p, group, opts, objs)
		if err != nil {
			t.Fatal(err)
		}
		visible := map[string]bool{}
		for _, o := range got {
			visible[o.GUID] = true
		}
		visibles = append(visibles, visible)
	}
	props := opts.Properties
	if props == nil {
		props = []string{}
	}
	for i := range objs {
		in := policy.Input{Action: policy.ActionView, Subject: p, Object: &objs[i], Group: group,
			Request: policy.Request{IncludeIndirect: opts.IncludeIndirect, Properties: props, SizeLimit: opts.SizeLimit}}
		want := ref.Allow(t, in)
		for k, visible := range visibles {
			if visible[objs[i].GUID] != want {
				t.Errorf("request %d, subject %s of domain %q, group %s, object %s (%s, domain %q): listing decided %v, evaluation %v",
					k+1, p.DN, p.DomainName, group.DN, objs[i].DN, objs[i].ObjectType, objs[i].DomainName, visible[objs[i].GUID], want)
			}
		}
	}
}

// TestRandomRolesMatchEvaluation compares the listing engine with per-object
// evaluation of the bundled policy on random roles, callers, groups and objects,
// and checks that the engine really took its fast path. Every other round adds a
// rule the translator does not handle (it reads properties), so that the residual
// is evaluated in Rego instead.
func TestRandomRolesMatchEvaluation(t *testing.T) {
	seed := uint64(1)
	r := rand.New(rand.NewPCG(seed, 2))
	for round := range 10 {
		modules, mode := policytest.BundledModules(t), "predicate"
		if round%2 == 1 {
			modules["reviewers.rego"] = "package dirgate.authz\nallow if \"reviewer\" in input.object.properties.role\n"
			mode = "residual"
		}
		groups := policytest.RandGroups(r, 12)
		data := map[string]any{"dirgate": map[string]any{"roles": policytest.RandRoles(r, groups, 1+r.IntN(8))}}
		a, log := policytest.OpenDir(t, modules, data)
		ref := policytest.NewReference(t, modules, data)
		objs := policytest.RandObjects(r, 40)
		policytest.RandomizeDomains(r, objs)
		for i := range objs {
			if r.IntN(4) == 0 {
				objs[i].Properties = map[string][]string{"role": {"reviewer"}}
			}
		}
		for range 4 {
			p := policytest.RandSubject(r, groups)
			g := groups[r.IntN(len(groups))]
			group := dirgate.Object{GUID: g.GUID, DN: g.DN, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
			opts := dirgate.ListOptions{IncludeIndirect: r.IntN(2) == 0}
			// The same request twice: the second is served by the cached plan.
			compareTimes(t, 2, a, ref, p, group, opts, objs)
		}
		if m := policytest.Modes(t, log); m[mode] != 8 {
			t.Errorf("round %d (seed %d): engine modes %v, want every listing decided by %s", round, seed, m, mode)
		}
	}
}

// TestDemoMatchesEvaluation: the same comparison on the bundled policy and demo
// directory, for both demo callers and every group's nested listing.
func TestDemoMatchesEvaluation(t *testing.T) {
	svc, _ := demoService(t, nil)
	var data map[string]any
	raw, err := bundled.FS.ReadFile("data.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	ref := policytest.NewReference(t, policytest.BundledModules(t), data)
	a := svc.Authz.(*policy.Authorizer)
	ctx := context.Background()
	for _, caller := range []string{danaDN, hugoDN, bellaDN} {
		p := policytest.Principal(t, svc, caller)
		if p.DomainName != "corp.example.com" {
			t.Errorf("%s: domain name %q, want the DN's corp.example.com", caller, p.DomainName)
		}
		for _, g := range []string{mixedMembers, newsletter, itDepartment, financeTeam, "CN=All Staff,OU=Groups,DC=corp,DC=example,DC=com"} {
			group, err := svc.Dir.Lookup(ctx, dirgate.MustParseIdentifier(g), nil)
			if err != nil {
				t.Fatal(err)
			}
			opts := dirgate.ListOptions{IncludeIndirect: true}
			l, err := svc.Listing(ctx, group, opts)
			objs := l.Objects
			if err != nil {
				t.Fatal(err)
			}
			compare(t, a, ref, p, group, opts, objs)
		}
	}
}

// FuzzBundledPolicyMatchesEvaluation: for any object the directory could return
// (its DN, type and name are the directory's, not dirgate's), the help desk's
// listing decides as per-object evaluation of the bundled policy does.
func FuzzBundledPolicyMatchesEvaluation(f *testing.F) {
	for _, seed := range []struct{ dn, typ string }{
		{"CN=Ann,OU=Staff,DC=corp,DC=example,DC=com", "user"},
		{`CN=x\,OU=Staff,DC=corp,DC=example,DC=com`, "user"},
		{`CN=x\\,OU=Workstations,DC=corp,DC=example,DC=com`, "computer"},
		{"CN=G,OU=GROUPS,DC=CORP,DC=EXAMPLE,DC=COM", "group"},
		{"CN=İ,OU=Staff,DC=corp,DC=example,DC=com", "user"},
	} {
		f.Add(seed.dn, seed.typ)
	}
	svc, a := demoService(f, nil)
	var data map[string]any
	raw, err := bundled.FS.ReadFile("data.json")
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		f.Fatal(err)
	}
	ref := policytest.NewReference(f, policytest.BundledModules(f), data)
	p := policytest.Principal(f, svc, hugoDN)
	group := dirgate.Object{GUID: "e2fafa62-2fd5-441f-be0b-2d2f35feb898", DN: newsletter, ObjectType: dirgate.TypeGroup}
	f.Fuzz(func(t *testing.T, dn, typ string) {
		objs := []dirgate.Object{{GUID: "00000000-0000-0000-0000-000000000001", DN: dn, ObjectType: typ}}
		compare(t, a, ref, p, group, dirgate.ListOptions{}, objs)
	})
}

// TestSubjectDomainMatchesEvaluation: one caller, the same in every member but its
// domain, asks for the same listing as a caller of each domain in turn (and each
// again), under roles limited to callers of some domains and scoped by domain. Each
// listing must decide as evaluation does for that domain: a plan or a listing's
// remembered decisions made for a caller of one domain must never serve a caller of
// another, nor one without a domain.
func TestSubjectDomainMatchesEvaluation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	groups := policytest.RandGroups(r, 4)
	trustee := groups[0].DN
	roles := []any{
		map[string]any{"name": "corp-callers", "trustees": []any{trustee}, "permissions": []any{"view"},
			"scopes": []any{map[string]any{"subtree": "OU=Staff,DC=corp,DC=example,DC=com"}}, "subjectDomains": []any{"CORP.example.com"}},
		map[string]any{"name": "fabrikam-callers", "trustees": []any{trustee}, "permissions": []any{"view"},
			"scopes": []any{map[string]any{"domain": "fabrikam.EXAMPLE.net"}}, "subjectDomains": []any{"fabrikam.example.net", "ångström.example"}},
		map[string]any{"name": "anyone-home", "trustees": []any{trustee}, "permissions": []any{"view"},
			"scopes": []any{map[string]any{"domain": "Corp.Example.Com"}}, "objectTypes": []any{"group"}},
	}
	data := map[string]any{"dirgate": map[string]any{"roles": roles}}
	for _, mode := range []string{"predicate", "residual"} {
		t.Run(mode, func(t *testing.T) {
			modules := policytest.BundledModules(t)
			if mode == "residual" { // a rule the translator does not handle: the residual is evaluated in Rego
				modules["reviewers.rego"] = "package dirgate.authz\nallow if \"reviewer\" in input.object.properties.role\n"
			}
			a, log := policytest.OpenDir(t, modules, data)
			ref := policytest.NewReference(t, modules, data)
			objs := policytest.RandObjects(r, 60)
			policytest.RandomizeDomains(r, objs)
			base := policytest.RandSubject(r, groups)
			base.Groups = []dirgate.GroupRef{{DN: groups[0].DN, GUID: groups[0].GUID, SID: groups[0].SID}}
			group := dirgate.Object{GUID: groups[1].GUID, DN: groups[1].DN, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
			listings := 0
			for _, domains := range [][]string{policytest.RandDomains, {"", "corp.example.com", "fabrikam.example.net", ""}} {
				for _, d := range domains {
					p := base
					p.DomainName = d
					compareTimes(t, 2, a, ref, p, group, dirgate.ListOptions{}, objs)
					listings += 2
				}
			}
			if m := policytest.Modes(t, log); m[mode] != listings {
				t.Errorf("engine modes %v, want every listing decided by %s", m, mode)
			}
		})
	}
}
