// Package policytest holds what the tests of package policy and of its rooms
// share: policy directories written for a test, the decision log as dirgate
// writes it, OPA evaluating a policy once per object (the reference every
// decision must equal), and a random organisation to decide on.
package policytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/decisionlog"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/upstream/memory"
)

// QuietLogger discards what it is given.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// LineLog is a decision log writing its JSON lines to w, as dirgate does, naming
// at most maxDenied (when given) denied GUIDs per line.
func LineLog(w io.Writer, maxDenied ...int) policy.DecisionLog {
	cfg := decisionlog.Config{Writer: w, Logger: QuietLogger()}
	if len(maxDenied) > 0 {
		cfg.MaxDenied = &maxDenied[0]
	}
	l, err := decisionlog.New(cfg)
	if err != nil {
		panic(err)
	}
	return l
}

// Shadowed is cfg with the candidate ccfg in shadow, opened as cmd/dirgate opens
// it: the candidate's logger, plan cache, builtins and bound of named GUIDs are
// the policy's. It is closed with the test.
func Shadowed(t testing.TB, cfg policy.Config, ccfg candidate.Config) (policy.Config, *candidate.Candidate) {
	t.Helper()
	if ccfg.Logger == nil {
		ccfg.Logger = cfg.Logger
	}
	if cfg.DecisionLog != nil {
		ccfg.MaxNamed = cfg.DecisionLog.MaxNamed()
	}
	ccfg.PlanCacheSize, ccfg.NetworkBuiltins, ccfg.ReloadDebounce = cfg.PlanCacheSize, cfg.NetworkBuiltins, cfg.ReloadDebounce
	c, err := candidate.Open(context.Background(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cfg.Shadow = c
	return cfg, c
}

// WriteDir writes a policy directory of modules and data.
func WriteDir(t testing.TB, modules map[string]string, data map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range modules {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// DecodeLines decodes each JSON line of log into a T and empties log.
func DecodeLines[T any](t *testing.T, log *bytes.Buffer) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(log)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l T
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	log.Reset()
	return out
}

// WaitFor polls cond: file system notification is asynchronous. The deadline only
// bounds a failing test; it asserts nothing about speed.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Reference evaluates data.dirgate.authz.allow once per object with the complete
// input, independently of package policy: the meaning every optimisation must keep.
type Reference struct {
	q rego.PreparedEvalQuery
}

// NewReference prepares the reference for modules and data.
func NewReference(t testing.TB, modules map[string]string, data map[string]any) *Reference {
	t.Helper()
	opts := []func(*rego.Rego){rego.Query("data.dirgate.authz.allow"), rego.Store(inmem.NewFromObject(data))}
	for name, src := range modules {
		opts = append(opts, rego.Module(name, src))
	}
	q, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &Reference{q: q}
}

// Allow is true when the decision is the boolean true; undefined, other values and
// errors deny.
func (r *Reference) Allow(t testing.TB, in policy.Input) bool {
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

// A random organisation: OUs, groups and objects whose names include what trips
// naive DN handling (escaped commas and backslashes, letter case, look-alike OUs).
var (
	// RandOUs are the organisation's OUs, look-alikes included.
	RandOUs = []string{
		"OU=Staff,DC=corp,DC=example,DC=com", "OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
		"OU=NotStaff,DC=corp,DC=example,DC=com", "OU=Workstations,DC=corp,DC=example,DC=com",
		"ou=staff,dc=corp,dc=example,dc=com", "CN=Users,DC=corp,DC=example,DC=com",
		`OU=A\,B,DC=corp,DC=example,DC=com`, "DC=corp,DC=example,DC=com",
	}
	randCNs   = []string{"Ann", "bob", `x\,OU=Staff`, `y\\`, `z\\\,OU=Staff`, "Zoë Ångström", "WS-01", `Kim Lee\+Park`}
	randTypes = []string{dirgate.TypeUser, dirgate.TypeComputer, dirgate.TypeGroup, dirgate.TypeContact, dirgate.TypeForeignPrincipal}
	// RandDomains are the domain names of objects and callers: the home domain and
	// others in several letter cases (non-ASCII ones included), a parent domain's
	// name and "" (a DN without DC components).
	RandDomains = []string{"corp.example.com", "CORP.EXAMPLE.COM", "fabrikam.example.net", "Fabrikam.Example.NET",
		"example.com", "ångström.example", "ÅNGSTRÖM.EXAMPLE", ""}
)

// RandGroup is a group of the random organisation.
type RandGroup struct{ DN, GUID, SID string }

// RandGUID is a random GUID in its canonical form.
func RandGUID(r *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
}

// RandGroups makes n groups with random GUIDs.
func RandGroups(r *rand.Rand, n int) []RandGroup {
	gs := make([]RandGroup, n)
	for i := range gs {
		gs[i] = RandGroup{
			DN:   fmt.Sprintf("CN=G%d,OU=Groups,DC=corp,DC=example,DC=com", i),
			GUID: RandGUID(r),
			SID:  fmt.Sprintf("S-1-5-21-1-2-3-%d", 1000+i),
		}
	}
	return gs
}

// someName names a group by DN, GUID (maybe braced, maybe upper case) or SID.
func someName(r *rand.Rand, g RandGroup, sidAllowed bool) string {
	switch r.IntN(5) {
	case 0:
		return strings.ToUpper(g.DN)
	case 1:
		return "{" + strings.ToUpper(g.GUID) + "}"
	case 2:
		return g.GUID
	case 3:
		if sidAllowed {
			return g.SID
		}
	}
	return g.DN
}

// RandRoles makes n random security roles of the bundled policy (rego/authz.rego)
// over groups, each group named by DN, GUID or SID in any case.
func RandRoles(r *rand.Rand, groups []RandGroup, n int) []any {
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
			// A domain scope and subjectDomains now and then: most roles apply,
			// so that what they grant (named properties) is exercised too.
			switch r.IntN(8) {
			case 0, 1:
				scopes = append(scopes, map[string]any{"all": true})
			case 2, 3, 4:
				scopes = append(scopes, map[string]any{"subtree": RandOUs[r.IntN(len(RandOUs))]})
			case 5, 6:
				scopes = append(scopes, map[string]any{"membersOf": []any{someName(r, groups[r.IntN(len(groups))], false)}})
			default:
				scopes = append(scopes, map[string]any{"domain": someDomain(r)})
			}
		}
		role["scopes"] = scopes
		if r.IntN(6) == 0 {
			domains := []any{}
			for range r.IntN(3) {
				domains = append(domains, someDomain(r))
			}
			role["subjectDomains"] = domains
		}
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

// someDomain is a domain name a role may name: one of RandDomains but "" (which
// the bundled policy's data_errors refuses).
func someDomain(r *rand.Rand) string { return RandDomains[r.IntN(len(RandDomains)-1)] }

// RandSubject is a caller in a random third of groups, of a random domain
// (RandDomains, "" included; its DN is in corp.example.com: the bundled policy reads
// domainName alone).
func RandSubject(r *rand.Rand, groups []RandGroup) dirgate.Principal {
	p := dirgate.Principal{DN: "CN=Caller,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", GUID: RandGUID(r), SID: "S-1-5-21-1-2-3-999", DisplayName: "Caller",
		DomainName: RandDomains[r.IntN(len(RandDomains))]}
	for _, g := range groups {
		if r.IntN(3) == 0 {
			p.Groups = append(p.Groups, dirgate.GroupRef{DN: g.DN, GUID: g.GUID, SID: g.SID})
		}
	}
	return p
}

// RandObjects makes n objects of random names, OUs and types, of the domain
// corp.example.com (RandomizeDomains varies it).
func RandObjects(r *rand.Rand, n int) []dirgate.Object {
	objs := make([]dirgate.Object, n)
	for i := range objs {
		dn := randCNs[r.IntN(len(randCNs))] + "," + RandOUs[r.IntN(len(RandOUs))]
		if r.IntN(4) == 0 {
			dn = strings.ToUpper(dn)
		}
		objs[i] = dirgate.Object{
			GUID: RandGUID(r), DN: "CN=" + dn, DisplayName: "o", ObjectType: randTypes[r.IntN(len(randTypes))],
			DomainName: "corp.example.com", DirectoryType: dirgate.DirectoryTypeActiveDirectory,
		}
	}
	return objs
}

// RandomizeDomains gives each of objs a random domain name of RandDomains ("" and
// other letter cases included; the name need not be the DN's: the bundled policy
// reads domainName alone).
func RandomizeDomains(r *rand.Rand, objs []dirgate.Object) {
	for i := range objs {
		objs[i].DomainName = RandDomains[r.IntN(len(RandDomains))]
	}
}

// BundledModules is the bundled policy's module.
func BundledModules(t testing.TB) map[string]string {
	t.Helper()
	src, err := bundled.FS.ReadFile("authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"authz.rego": string(src)}
}

// Policies whose decisions tell which one is in force.
const (
	AllowUsers     = "package dirgate.authz\nallow if input.object.objectType == \"user\"\n"
	AllowComputers = "package dirgate.authz\nallow if input.object.objectType == \"computer\"\n"
	BrokenPolicy   = "package dirgate.authz\nallow if {\n" // does not parse
)

// A user and a computer, which Visible lists.
var (
	ReloadUser     = dirgate.Object{GUID: "u", DN: "CN=u,DC=x", ObjectType: dirgate.TypeUser}
	ReloadComputer = dirgate.Object{GUID: "c", DN: "CN=c,DC=x", ObjectType: dirgate.TypeComputer}
)

// Visible lists the GUIDs of the test objects the policy in force lets anybody see.
func Visible(t *testing.T, a *policy.Authorizer) string {
	t.Helper()
	got, err := a.FilterView(context.Background(), dirgate.Principal{}, dirgate.Object{}, dirgate.ListOptions{},
		[]dirgate.Object{ReloadUser, ReloadComputer})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range got {
		ids = append(ids, o.GUID)
	}
	return strings.Join(ids, ",")
}

// WriteFile writes content to path.
func WriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchOrg is the benchmarks”s organisation: the bundled policy with 20 roles that
// all apply to a caller in 20 groups (the largest residual), and listings of users,
// computers and groups spread over 20 OUs.
type BenchOrg struct {
	Modules map[string]string
	Data    map[string]any
	Caller  dirgate.Principal
	Group   dirgate.Object
}

// NewBenchOrg makes the organisation.
func NewBenchOrg() BenchOrg {
	org := BenchOrg{Group: dirgate.Object{GUID: "11111111-0000-0000-0000-000000000000", DN: "CN=Listed,OU=Groups,DC=corp,DC=example,DC=com", ObjectType: dirgate.TypeGroup}}
	org.Caller = dirgate.Principal{DN: "CN=Caller,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", GUID: "22222222-0000-0000-0000-000000000000", SID: "S-1-5-21-1-2-3-500"}
	var roles []any
	for i := range 20 {
		g := dirgate.GroupRef{DN: fmt.Sprintf("CN=Role Group %02d,OU=Groups,DC=corp,DC=example,DC=com", i),
			GUID: fmt.Sprintf("%08d-0000-0000-0000-000000000000", i), SID: fmt.Sprintf("S-1-5-21-1-2-3-%d", 1100+i)}
		org.Caller.Groups = append(org.Caller.Groups, g)
		role := map[string]any{
			"name":        fmt.Sprintf("role-%02d", i),
			"trustees":    []any{[]string{g.DN, g.GUID, g.SID}[i%3]},
			"permissions": []any{"view", "remove"},
		}
		switch i % 4 {
		case 0, 1:
			role["scopes"] = []any{map[string]any{"subtree": fmt.Sprintf("OU=Dept%02d,OU=Staff,DC=corp,DC=example,DC=com", i)}}
			role["objectTypes"] = []any{"user"}
		case 2:
			role["scopes"] = []any{
				map[string]any{"subtree": fmt.Sprintf("OU=Site%02d,OU=Workstations,DC=corp,DC=example,DC=com", i)},
				map[string]any{"subtree": fmt.Sprintf("OU=Dept%02d,OU=Staff,DC=corp,DC=example,DC=com", i)},
			}
			role["objectTypes"] = []any{"user", "computer"}
		default:
			role["scopes"] = []any{map[string]any{"membersOf": []any{fmt.Sprintf("CN=Other %d,OU=Groups,DC=corp,DC=example,DC=com", i)}}}
		}
		roles = append(roles, role)
	}
	org.Data = map[string]any{"dirgate": map[string]any{"roles": roles}}
	return org
}

// Objects is a listing of n objects, sorted as listings are.
func (org BenchOrg) Objects(n int) []dirgate.Object {
	objs := make([]dirgate.Object, n)
	for i := range objs {
		o := dirgate.Object{GUID: fmt.Sprintf("%08x-1111-2222-3333-444444444444", i), DisplayName: fmt.Sprintf("Object %d", i),
			DomainName: "corp.example.com", DirectoryType: dirgate.DirectoryTypeActiveDirectory, Properties: map[string][]string{}}
		switch i % 5 {
		case 0, 1, 2:
			o.ObjectType = dirgate.TypeUser
			o.DN = fmt.Sprintf("CN=User %d,OU=Dept%02d,OU=Staff,DC=corp,DC=example,DC=com", i, i%23)
		case 3:
			o.ObjectType = dirgate.TypeComputer
			o.DN = fmt.Sprintf("CN=WS-%05d,OU=Site%02d,OU=Workstations,DC=corp,DC=example,DC=com", i, i%23)
		default:
			o.ObjectType = dirgate.TypeGroup
			o.DN = fmt.Sprintf("CN=Group %d,OU=Groups,DC=corp,DC=example,DC=com", i)
		}
		objs[i] = o
	}
	dirgate.SortObjects(objs)
	return objs
}

// WS0001 is the demo's workstation that LAPSDemo gives a LAPS password,
// LAPSPass.
const (
	WS0001   = "CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com"
	LAPSPass = "Laps-Secret-0001"
)

// LAPSDemo is the demo directory with a legacy LAPS password on WS-0001, as the
// ms-Mcs-AdmPwd schema extension stores it.
func LAPSDemo(t testing.TB) *memory.Directory {
	t.Helper()
	demo := fixture.Export(fixture.Demo())
	anchor := "dn: " + WS0001 + "\n"
	if !bytes.Contains(demo, []byte(anchor)) {
		t.Fatal("the demo changed: no WS-0001")
	}
	ldif := strings.Replace(string(demo), anchor, anchor+"ms-Mcs-AdmPwd: "+LAPSPass+"\n", 1)
	d, err := memory.Load("laps.ldif", []byte(ldif))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Callers of the demo directory (cmd/dirgate's demo tokens act as Dana and Hugo).
const (
	DanaDN  = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	HugoDN  = "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"
	BellaDN = "CN=Bella Hughes,OU=Sales,OU=Staff,DC=corp,DC=example,DC=com"

	// MixedMembersDN is the demo's group of members of every type.
	MixedMembersDN = "CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"
)

// Principal resolves dn in svc.
func Principal(t testing.TB, svc *dirgate.MemberService, dn string) dirgate.Principal {
	t.Helper()
	p, err := svc.Principal(context.Background(), dirgate.MustParseIdentifier(dn))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// OpenDir writes a policy directory and opens an Authorizer on it with a decision
// log the test can read.
func OpenDir(t testing.TB, modules map[string]string, data map[string]any) (*policy.Authorizer, *bytes.Buffer) {
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
	a, err := policy.Open(context.Background(), policy.Config{Dir: dir, Logger: QuietLogger(), DecisionLog: LineLog(&log, -1)})
	if err != nil {
		t.Fatal(err)
	}
	return a, &log
}

// Modes returns the engine modes of the decision log's listing lines.
func Modes(t testing.TB, log *bytes.Buffer) map[string]int {
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
