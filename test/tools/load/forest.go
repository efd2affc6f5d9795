package load

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// ForestConfig reaches the two domains of test/harness/samba/forest.sh: CORP, the
// home domain, and FABRIKAM, joined to it by a forest trust. The cross-domain
// comparison (ForestSetup) lists groups of CORP, half of whose members are
// FABRIKAM's users, beside groups of CORP alone.
type ForestConfig struct {
	Corp, Fabrikam LDAPConfig
	// CorpUniversal is CORP's seeded universal group: it holds CORP's Global, which
	// holds CORP's two seeded users. Every group of the comparison holds it, so
	// that a nested listing reads three levels.
	CorpUniversal string
	// Caller is CORP's seeded User: the caller of every listing.
	Caller string
}

// ForestConfigFromEnv reads the variables forest.sh writes (DIRGATE_TEST_FOREST_*,
// see test/harness/sambatest/forest.go). The DCs must be on loopback or a private
// address (forest.sh's bridge): load goes nowhere else.
func ForestConfigFromEnv(getenv func(string) string) (ForestConfig, error) {
	v := func(dom, suffix string) string { return getenv("DIRGATE_TEST_FOREST_" + dom + "_" + suffix) }
	ca := getenv("DIRGATE_TEST_FOREST_CA_FILE")
	var missing, bad []string
	domain := func(dom string) LDAPConfig {
		c := LDAPConfig{URL: v(dom, "URL"), BaseDN: v(dom, "BASE_DN"), BindDN: v(dom, "BIND_DN"),
			PasswordFile: v(dom, "PASSWORD_FILE"), AdminDN: v(dom, "ADMIN_DN"),
			AdminPasswordFile: v(dom, "ADMIN_PASSWORD_FILE"), CAFile: ca}
		for suffix, val := range map[string]string{"URL": c.URL, "BASE_DN": c.BaseDN, "BIND_DN": c.BindDN,
			"PASSWORD_FILE": c.PasswordFile, "ADMIN_DN": c.AdminDN, "ADMIN_PASSWORD_FILE": c.AdminPasswordFile} {
			if val == "" {
				missing = append(missing, "DIRGATE_TEST_FOREST_"+dom+"_"+suffix)
			}
		}
		if c.URL != "" && !privateURL(c.URL) {
			bad = append(bad, fmt.Sprintf("%s URL %q is not ldaps:// or ldap:// on a loopback or private address", dom, c.URL))
		}
		return c
	}
	fc := ForestConfig{Corp: domain("CORP"), Fabrikam: domain("FABRIKAM"),
		CorpUniversal: v("CORP", "UNIVERSAL_DN"), Caller: v("CORP", "USER_DN")}
	for name, val := range map[string]string{"DIRGATE_TEST_FOREST_CA_FILE": ca,
		"DIRGATE_TEST_FOREST_CORP_UNIVERSAL_DN": fc.CorpUniversal, "DIRGATE_TEST_FOREST_CORP_USER_DN": fc.Caller} {
		if val == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fc, fmt.Errorf("forest config: %s not set (source the env file test/harness/samba/forest.sh writes)", strings.Join(missing, ", "))
	}
	if len(bad) > 0 {
		return fc, fmt.Errorf("forest config: %s", strings.Join(bad, "; "))
	}
	return fc, nil
}

// privateURL accepts an LDAP URL whose host is a loopback or private IP address.
func privateURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "ldaps" && u.Scheme != "ldap") {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

// ForestGroup is a domain-local group of CORP: Members, CORP's objects by DN, and
// Foreign, FABRIKAM's users, which CORP's DC holds through foreign security
// principals (added by SID).
type ForestGroup struct {
	DN      string
	Members []string
	Foreign []string
}

// ForestPair is one size of the comparison: Cross and Home are domain-local groups
// of CORP of Size direct members each, with the same nesting (CORP's Universal, and
// through it CORP's Global and two users: Size+3 objects nested). Cross holds
// Size/2 of FABRIKAM's users, each through its FSP, and CORP's users for the rest;
// Home holds CORP's users only. Listed through the router, Cross's members come
// from both domains and Home's from CORP alone; in the cache both are one listing
// of as many objects.
type ForestPair struct {
	Size        int
	Cross, Home string
}

// ForestSetup is what the cross-domain comparison makes sure of on the forest's
// DCs, under OU=dirgate-load of each domain, and its one caller, who views
// everything (ForestRole).
type ForestSetup struct {
	Pairs         []ForestPair
	CorpUsers     []string // DNs in CORP
	FabrikamUsers []string // DNs in FABRIKAM
	Groups        []ForestGroup
	Callers       []Caller
}

// ForestSetup returns the groups of each size (direct members, at least 2: CORP's
// Universal and one more; size 2 is the shape of the seeded CORP Local group).
func (fc ForestConfig) ForestSetup(sizes []int) (ForestSetup, error) {
	if len(sizes) == 0 {
		return ForestSetup{}, errors.New("forest setup: no sizes")
	}
	largest := 0
	for _, n := range sizes {
		if n < 2 {
			return ForestSetup{}, fmt.Errorf("forest setup: size %d: a group holds CORP's Universal and at least one user", n)
		}
		largest = max(largest, n)
	}
	corpOU, fabOU := "OU=dirgate-load,"+fc.Corp.BaseDN, "OU=dirgate-load,"+fc.Fabrikam.BaseDN
	s := ForestSetup{Callers: []Caller{{Name: "admin", Subject: fc.Caller}}}
	for i := 1; i < largest; i++ {
		s.CorpUsers = append(s.CorpUsers, fmt.Sprintf("CN=dgl-cu%d,%s", i, corpOU))
	}
	for i := 1; i <= largest/2; i++ {
		s.FabrikamUsers = append(s.FabrikamUsers, fmt.Sprintf("CN=dgl-fu%d,%s", i, fabOU))
	}
	seen := map[int]bool{}
	for _, n := range sizes {
		if seen[n] {
			continue
		}
		seen[n] = true
		p := ForestPair{Size: n, Cross: fmt.Sprintf("CN=dgl-cross-%d,%s", n, corpOU), Home: fmt.Sprintf("CN=dgl-home-%d,%s", n, corpOU)}
		foreign := n / 2
		s.Pairs = append(s.Pairs, p)
		s.Groups = append(s.Groups,
			ForestGroup{DN: p.Cross, Members: append([]string{fc.CorpUniversal}, s.CorpUsers[:n-1-foreign]...), Foreign: s.FabrikamUsers[:foreign]},
			ForestGroup{DN: p.Home, Members: append([]string{fc.CorpUniversal}, s.CorpUsers[:n-1]...)})
	}
	return s, nil
}

// ForestRole is the policy role of the comparison's caller: it views every object
// of both domains and every property.
func (s ForestSetup) ForestRole() map[string]any {
	return map[string]any{"name": "load-forest", "description": "The forest comparison's caller views everything.",
		"trustees": []string{s.Callers[0].Subject}, "permissions": []string{"view"},
		"scopes": []any{map[string]bool{"all": true}}, "properties": []string{"*"}}
}

// ForestWorkloads are, for each pair, four workloads of one listing each, as the
// setup's caller: the cross group's and the home group's, direct and nested. Names:
// cross<N>, home<N>, cross<N>-nested, home<N>-nested.
func (s ForestSetup) ForestWorkloads() []Workload {
	var out []Workload
	for _, p := range s.Pairs {
		for _, nested := range []bool{false, true} {
			for _, g := range []struct{ kind, dn string }{{"cross", p.Cross}, {"home", p.Home}} {
				name := g.kind + strconv.Itoa(p.Size)
				if nested {
					name += "-nested"
				}
				out = append(out, Workload{Name: name, Callers: s.Callers, Ops: []Op{
					{Name: name, Kind: OpList, Caller: 0, Query: Query{Group: g.dn, Indirect: nested}, Weight: 1}}})
			}
		}
	}
	return out
}

// EnsureForest makes sure of the setup's users and groups, as each domain's
// administrator: users that are missing are created (disabled, without a
// password: they are listed, never signed in), and each group holds exactly its
// members, corrected when a run was stopped half way. Running it again changes
// nothing.
func EnsureForest(corp, fabrikam *goldap.Conn, fc ForestConfig, s ForestSetup) error {
	if err := ensureUsers(corp, "OU=dirgate-load,"+fc.Corp.BaseDN, s.CorpUsers); err != nil {
		return fmt.Errorf("CORP: %w", err)
	}
	if err := ensureUsers(fabrikam, "OU=dirgate-load,"+fc.Fabrikam.BaseDN, s.FabrikamUsers); err != nil {
		return fmt.Errorf("FABRIKAM: %w", err)
	}
	sids, err := readSIDs(fabrikam, "OU=dirgate-load,"+fc.Fabrikam.BaseDN)
	if err != nil {
		return fmt.Errorf("FABRIKAM: %w", err)
	}
	fsps := "CN=ForeignSecurityPrincipals," + fc.Corp.BaseDN
	for _, g := range s.Groups {
		// want maps each member as CORP's DC lists it to the value that adds it.
		want := map[string]string{}
		for _, m := range g.Members {
			want[dnKey(m)] = m
		}
		for _, m := range g.Foreign {
			sid, ok := sids[dnKey(m)]
			if !ok {
				return fmt.Errorf("FABRIKAM: no objectSid for %s", m)
			}
			want[dnKey("CN="+sid+","+fsps)] = "<SID=" + sid + ">"
		}
		if err := ensureForestGroup(corp, g.DN, want); err != nil {
			return fmt.Errorf("CORP: %w", err)
		}
	}
	return nil
}

func ensureUsers(conn *goldap.Conn, ou string, users []string) error {
	add := goldap.NewAddRequest(ou, nil)
	add.Attribute("objectClass", []string{"organizationalUnit"})
	if err := conn.Add(add); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultEntryAlreadyExists) {
		return fmt.Errorf("ensure %s: %w", ou, err)
	}
	res, err := conn.SearchWithPaging(goldap.NewSearchRequest(ou, goldap.ScopeSingleLevel, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=user)", []string{"1.1"}, nil), 500)
	if err != nil {
		return fmt.Errorf("read %s: %w", ou, err)
	}
	have := map[string]bool{}
	for _, e := range res.Entries {
		have[dnKey(e.DN)] = true
	}
	for _, u := range users {
		if have[dnKey(u)] {
			continue
		}
		cn := strings.TrimPrefix(strings.SplitN(u, ",", 2)[0], "CN=")
		add := goldap.NewAddRequest(u, nil)
		add.Attribute("objectClass", []string{"user"})
		add.Attribute("sAMAccountName", []string{cn})
		if err := conn.Add(add); err != nil {
			return fmt.Errorf("create %s: %w", u, err)
		}
	}
	return nil
}

// readSIDs maps the DN of each user under ou to its SID.
func readSIDs(conn *goldap.Conn, ou string) (map[string]string, error) {
	res, err := conn.SearchWithPaging(goldap.NewSearchRequest(ou, goldap.ScopeSingleLevel, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=user)", []string{"objectSid"}, nil), 500)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ou, err)
	}
	out := map[string]string{}
	for _, e := range res.Entries {
		sid, err := ldapentry.SIDFromBytes(e.GetRawAttributeValue("objectSid"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.DN, err)
		}
		out[dnKey(e.DN)] = sid
	}
	return out, nil
}

// ensureForestGroup creates dn as a domain-local security group (the only scope
// that may hold principals of another forest) holding exactly want's members, or
// corrects its members. A member added as <SID=…> of another domain makes CORP's
// DC create the foreign security principal it then lists.
func ensureForestGroup(conn *goldap.Conn, dn string, want map[string]string) error {
	res, err := conn.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=group)", []string{"member"}, nil))
	have := map[string]string{}
	switch {
	case goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject):
		cn := strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "CN=")
		add := goldap.NewAddRequest(dn, nil)
		add.Attribute("objectClass", []string{"group"})
		add.Attribute("sAMAccountName", []string{cn})
		add.Attribute("groupType", []string{strconv.Itoa(-2147483644)}) // domain local, security
		if err := conn.Add(add); err != nil {
			return fmt.Errorf("create %s: %w", dn, err)
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", dn, err)
	case len(res.Entries) != 1:
		return fmt.Errorf("read %s: %d entries", dn, len(res.Entries))
	default:
		for _, m := range res.Entries[0].GetAttributeValues("member") {
			have[dnKey(m)] = m
		}
	}
	var missing, extra []string
	for k, v := range want {
		if _, ok := have[k]; !ok {
			missing = append(missing, v)
		}
	}
	for k, m := range have {
		if _, ok := want[k]; !ok {
			extra = append(extra, m)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	mod := goldap.NewModifyRequest(dn, nil)
	if len(missing) > 0 {
		mod.Add("member", missing)
	}
	if len(extra) > 0 {
		mod.Delete("member", extra)
	}
	if err := conn.Modify(mod); err != nil {
		return fmt.Errorf("members of %s: %w", dn, err)
	}
	return nil
}

// PairedWorkloads is the ratio of target's server CPU per request in workload to
// its own in base, and the same of its throughput, in each repetition where both
// ran and were read, in repetition order: two listings served by one process
// seconds apart (Paired's reasoning).
func PairedWorkloads(reports []*Report, target, workload, base string) (cpu, throughput []float64) {
	type run struct{ cpu, tput float64 }
	byRep := map[int]*[2]*run{}
	var reps []int
	for _, r := range reports {
		if r.Target != target || (r.Workload != workload && r.Workload != base) {
			continue
		}
		c, _ := r.ServerCPU()
		p := byRep[r.Repetition]
		if p == nil {
			p = &[2]*run{}
			byRep[r.Repetition] = p
			reps = append(reps, r.Repetition)
		}
		i := 0
		if r.Workload == base {
			i = 1
		}
		p[i] = &run{cpu: c, tput: r.All.Throughput}
	}
	slices.Sort(reps)
	for _, rep := range reps {
		p := byRep[rep]
		if p[0] == nil || p[1] == nil {
			continue
		}
		if p[0].cpu > 0 && p[1].cpu > 0 {
			cpu = append(cpu, p[0].cpu/p[1].cpu)
		}
		if p[0].tput > 0 && p[1].tput > 0 {
			throughput = append(throughput, p[0].tput/p[1].tput)
		}
	}
	return cpu, throughput
}

// CheckDomains holds the captured listings to the comparison's premise: each cross
// group's listing, direct and nested, holds exactly Size/2 objects whose domainName
// is foreign (FABRIKAM's DNS name), each home group's none. A listing sent in a
// content coding is not read.
func (s ForestSetup) CheckDomains(bodies map[string]Captured, foreign string) error {
	var errs []error
	for _, w := range s.ForestWorkloads() {
		op := w.Ops[0]
		c, ok := bodies[bareKey(s.Callers[op.Caller].Token, op.Query.RawQuery())]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no listing captured", w.Name))
			continue
		}
		if c.Encoding != "" {
			continue
		}
		var objs []struct {
			DomainName string `json:"domainName"`
		}
		if err := json.Unmarshal(c.Body, &objs); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", w.Name, err))
			continue
		}
		n := 0
		for _, o := range objs {
			if strings.EqualFold(o.DomainName, foreign) {
				n++
			}
		}
		want := 0
		for _, p := range s.Pairs {
			if dnKey(op.Query.Group) == dnKey(p.Cross) {
				want = p.Size / 2
			}
		}
		if n != want {
			errs = append(errs, fmt.Errorf("%s: %d of %d objects of %s, want %d", w.Name, n, len(objs), foreign, want))
		}
	}
	return errors.Join(errs...)
}
