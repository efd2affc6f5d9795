package policy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	bundled "github.com/dirgate/dirgate/rego"
)

// reference evaluates data.dirgate.authz.allow once per object with the complete
// input, independently of package policy: the meaning every optimisation must keep.
type reference struct {
	q rego.PreparedEvalQuery
}

func newReference(t testing.TB, modules map[string]string, data map[string]any) *reference {
	t.Helper()
	opts := []func(*rego.Rego){rego.Query("data.dirgate.authz.allow"), rego.Store(inmem.NewFromObject(data))}
	for name, src := range modules {
		opts = append(opts, rego.Module(name, src))
	}
	q, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &reference{q: q}
}

// allow is true when the decision is the boolean true; undefined, other values and
// errors deny.
func (r *reference) allow(t testing.TB, in policy.Input) bool {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	rs, err := r.q.Eval(context.Background(), rego.EvalInput(doc))
	if err != nil || len(rs) != 1 {
		return false
	}
	v, ok := rs[0].Expressions[0].Value.(bool)
	return ok && v
}

// openDir writes a policy directory and opens an Authorizer on it with a decision
// log the test can read.
func openDir(t testing.TB, modules map[string]string, data map[string]any) (*policy.Authorizer, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range modules {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: quietLogger(), DecisionLog: lineLog(&log, -1)})
	if err != nil {
		t.Fatal(err)
	}
	return a, &log
}

// modes returns the engine modes of the decision log's listing lines.
func modes(t testing.TB, log *bytes.Buffer) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(log)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Engine struct {
				Mode string `json:"mode"`
			} `json:"engine"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Engine.Mode != "" {
			out[line.Engine.Mode]++
		}
	}
	log.Reset()
	return out
}

// compare decides a listing with the Authorizer and object by object with the
// reference, and reports every object on which they differ.
func compare(t *testing.T, a *policy.Authorizer, ref *reference, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) {
	t.Helper()
	compareTimes(t, 1, a, ref, p, group, opts, objs)
}

// compareTimes asks the Authorizer n times (the first request builds the caller's
// predicate, the next ones reuse it) and the reference once.
func compareTimes(t *testing.T, n int, a *policy.Authorizer, ref *reference, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) {
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
		want := ref.allow(t, in)
		for k, visible := range visibles {
			if visible[objs[i].GUID] != want {
				t.Errorf("request %d, subject %s, group %s, object %s (%s): listing decided %v, evaluation %v",
					k+1, p.DN, group.DN, objs[i].DN, objs[i].ObjectType, visible[objs[i].GUID], want)
			}
		}
	}
}

// A random organisation: OUs, groups and objects whose names include what trips
// naive DN handling (escaped commas and backslashes, letter case, look-alike OUs).
var (
	randOUs = []string{
		"OU=Staff,DC=corp,DC=example,DC=com", "OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
		"OU=NotStaff,DC=corp,DC=example,DC=com", "OU=Workstations,DC=corp,DC=example,DC=com",
		"ou=staff,dc=corp,dc=example,dc=com", "CN=Users,DC=corp,DC=example,DC=com",
		`OU=A\,B,DC=corp,DC=example,DC=com`, "DC=corp,DC=example,DC=com",
	}
	randCNs   = []string{"Ann", "bob", `x\,OU=Staff`, `y\\`, `z\\\,OU=Staff`, "Zoë Ångström", "WS-01", `Kim Lee\+Park`}
	randTypes = []string{dirgate.TypeUser, dirgate.TypeComputer, dirgate.TypeGroup, dirgate.TypeContact, dirgate.TypeForeignPrincipal}
)

type randGroup struct{ dn, guid, sid string }

func randGUID(r *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
}

func randGroups(r *rand.Rand, n int) []randGroup {
	gs := make([]randGroup, n)
	for i := range gs {
		gs[i] = randGroup{
			dn:   fmt.Sprintf("CN=G%d,OU=Groups,DC=corp,DC=example,DC=com", i),
			guid: randGUID(r),
			sid:  fmt.Sprintf("S-1-5-21-1-2-3-%d", 1000+i),
		}
	}
	return gs
}

// someName names a group by DN, GUID (maybe braced, maybe upper case) or SID.
func someName(r *rand.Rand, g randGroup, sidAllowed bool) string {
	switch r.IntN(5) {
	case 0:
		return strings.ToUpper(g.dn)
	case 1:
		return "{" + strings.ToUpper(g.guid) + "}"
	case 2:
		return g.guid
	case 3:
		if sidAllowed {
			return g.sid
		}
	}
	return g.dn
}

func randRoles(r *rand.Rand, groups []randGroup, n int) []any {
	roles := make([]any, n)
	for i := range roles {
		role := map[string]any{"name": fmt.Sprintf("role%d", i)}
		var trustees []any
		for range 1 + r.IntN(2) {
			trustees = append(trustees, someName(r, groups[r.IntN(len(groups))], true))
		}
		role["trustees"] = trustees
		perms := [][]any{{"view"}, {"remove"}, {"view", "remove"}}[r.IntN(3)]
		role["permissions"] = perms
		var scopes []any
		for range 1 + r.IntN(2) {
			switch r.IntN(4) {
			case 0:
				scopes = append(scopes, map[string]any{"all": true})
			case 1, 2:
				scopes = append(scopes, map[string]any{"subtree": randOUs[r.IntN(len(randOUs))]})
			default:
				scopes = append(scopes, map[string]any{"membersOf": []any{someName(r, groups[r.IntN(len(groups))], false)}})
			}
		}
		role["scopes"] = scopes
		if r.IntN(2) == 0 {
			var types []any
			for _, ty := range randTypes {
				if r.IntN(2) == 0 {
					types = append(types, ty)
				}
			}
			role["objectTypes"] = types
		}
		roles[i] = role
	}
	return roles
}

func randSubject(r *rand.Rand, groups []randGroup) dirgate.Principal {
	p := dirgate.Principal{DN: "CN=Caller,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", GUID: randGUID(r), SID: "S-1-5-21-1-2-3-999", DisplayName: "Caller"}
	for _, g := range groups {
		if r.IntN(3) == 0 {
			p.Groups = append(p.Groups, dirgate.GroupRef{DN: g.dn, GUID: g.guid, SID: g.sid})
		}
	}
	return p
}

func randObjects(r *rand.Rand, n int) []dirgate.Object {
	objs := make([]dirgate.Object, n)
	for i := range objs {
		dn := randCNs[r.IntN(len(randCNs))] + "," + randOUs[r.IntN(len(randOUs))]
		if r.IntN(4) == 0 {
			dn = strings.ToUpper(dn)
		}
		objs[i] = dirgate.Object{
			GUID: randGUID(r), DN: "CN=" + dn, DisplayName: "o", ObjectType: randTypes[r.IntN(len(randTypes))],
			DomainName: "corp.example.com", DirectoryType: dirgate.DirectoryTypeActiveDirectory,
		}
	}
	return objs
}

func bundledModules(t testing.TB) map[string]string {
	t.Helper()
	src, err := bundled.FS.ReadFile("authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"authz.rego": string(src)}
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
		modules, mode := bundledModules(t), "predicate"
		if round%2 == 1 {
			modules["reviewers.rego"] = "package dirgate.authz\nallow if \"reviewer\" in input.object.properties.role\n"
			mode = "residual"
		}
		groups := randGroups(r, 12)
		data := map[string]any{"dirgate": map[string]any{"roles": randRoles(r, groups, 1+r.IntN(8))}}
		a, log := openDir(t, modules, data)
		ref := newReference(t, modules, data)
		objs := randObjects(r, 40)
		for i := range objs {
			if r.IntN(4) == 0 {
				objs[i].Properties = map[string][]string{"role": {"reviewer"}}
			}
		}
		for range 4 {
			p := randSubject(r, groups)
			g := groups[r.IntN(len(groups))]
			group := dirgate.Object{GUID: g.guid, DN: g.dn, ObjectType: dirgate.TypeGroup, DisplayName: "g"}
			opts := dirgate.ListOptions{IncludeIndirect: r.IntN(2) == 0}
			// The same request twice: the second is served by the cached plan.
			compareTimes(t, 2, a, ref, p, group, opts, objs)
		}
		if m := modes(t, log); m[mode] != 8 {
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
	ref := newReference(t, bundledModules(t), data)
	a := svc.Authz.(*policy.Authorizer)
	ctx := context.Background()
	for _, caller := range []string{danaDN, hugoDN, bellaDN} {
		p := principal(t, svc, caller)
		for _, g := range []string{mixedMembers, newsletter, itDepartment, financeTeam, "CN=All Staff,OU=Groups,DC=corp,DC=example,DC=com"} {
			group, err := svc.Dir.Lookup(ctx, dirgate.MustParseIdentifier(g), nil)
			if err != nil {
				t.Fatal(err)
			}
			opts := dirgate.ListOptions{IncludeIndirect: true}
			objs, err := svc.Listing(ctx, group, opts)
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
	ref := newReference(f, bundledModules(f), data)
	p := principal(f, svc, hugoDN)
	group := dirgate.Object{GUID: "e2fafa62-2fd5-441f-be0b-2d2f35feb898", DN: newsletter, ObjectType: dirgate.TypeGroup}
	f.Fuzz(func(t *testing.T, dn, typ string) {
		objs := []dirgate.Object{{GUID: "00000000-0000-0000-0000-000000000001", DN: dn, ObjectType: typ}}
		compare(t, a, ref, p, group, dirgate.ListOptions{}, objs)
	})
}
