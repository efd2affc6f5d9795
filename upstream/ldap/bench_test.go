package ldap

// Benchmarks against the harness DC: the adapter behind dirgate.MemberService
// compared with the cheapest equivalent query a program would send with go-ldap by
// hand, on one warm connection, with the same attributes.
//
//	go test -run '^$' -bench ListLarge -benchtime 10x -count 5 ./upstream/ldap/

import (
	"context"
	"strconv"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

func benchDC(b *testing.B) (sambatest.DC, *Directory) {
	dc := sambatest.Env(b)
	if dc.FixtureDir == "" {
		b.Skip("the DC was seeded without the fixture")
	}
	return dc, openDC(b, dcConfig(dc))
}

// rawSearch runs one search by hand and returns the entries: paged when pageSize > 0
// (go-ldap's SearchWithPaging), otherwise in one request.
func rawSearch(b *testing.B, c *goldap.Conn, base string, scope int, filter string, ctl []goldap.Control, pageSize uint32) []*goldap.Entry {
	req := goldap.NewSearchRequest(base, scope, goldap.NeverDerefAliases, 0, 0, false, filter, baseAttrs, ctl)
	var res *goldap.SearchResult
	var err error
	if pageSize > 0 {
		res, err = c.SearchWithPaging(req, pageSize)
	} else {
		res, err = c.Search(req)
	}
	if err != nil {
		b.Fatalf("search %s %s: %v", base, filter, err)
	}
	return res.Entries
}

// Listing strategies: ASQ without paging (the adapter's choice on Samba), ASQ with
// paging (its choice elsewhere), the paged memberOf filter (its fallback without ASQ).
var strategies = []struct {
	name  string
	set   func(*Directory)
	asq   bool
	paged bool
}{
	{"asq", func(d *Directory) { d.asq = true; d.pageASQ.Store(false) }, true, false},
	{"asqPaged", func(d *Directory) { d.asq = true; d.pageASQ.Store(true) }, true, true},
	{"memberOf", func(d *Directory) { d.asq = false }, false, true},
}

// rawMembers is a group's direct members by hand: ASQ or a paged memberOf filter,
// plus the primaryGroupID search.
func rawMembers(b *testing.B, c *goldap.Conn, baseDN, dn string, rid int, asq, paged bool) []*goldap.Entry {
	var out []*goldap.Entry
	page := map[bool]uint32{true: 1000}[paged]
	if asq {
		out = rawSearch(b, c, dn, goldap.ScopeBaseObject, "(objectClass=*)", []goldap.Control{asqControl("member")}, page)
	} else {
		out = rawSearch(b, c, baseDN, goldap.ScopeWholeSubtree, "(memberOf="+goldap.EscapeFilter(dn)+")", nil, page)
	}
	if rid > 0 {
		out = append(out, rawSearch(b, c, baseDN, goldap.ScopeWholeSubtree, "(primaryGroupID="+strconv.Itoa(rid)+")", nil, 1000)...)
	}
	return out
}

func BenchmarkListLargeDirect(b *testing.B) {
	dc, d := benchDC(b)
	org := fixture.Large()
	want := len(org.DirectMembers(org.MustObject(fixture.AllStaffDN)))
	group := mustLookup(b, d, fixture.AllStaffDN)
	rid, _ := d.domainRID(group.SID)
	id := dirgate.MustParseIdentifier(fixture.AllStaffDN)
	for _, st := range strategies {
		b.Run("adapter/"+st.name, func(b *testing.B) {
			st.set(d)
			svc := &dirgate.MemberService{Dir: d}
			for b.Loop() {
				objs, err := svc.List(context.Background(), dirgate.Principal{}, id, dirgate.ListOptions{})
				if err != nil || len(objs) != want {
					b.Fatalf("%d objects, %v; want %d", len(objs), err, want)
				}
			}
		})
		b.Run("raw/"+st.name, func(b *testing.B) {
			c := dc.DialService(b)
			for b.Loop() {
				if n := len(rawMembers(b, c, dc.BaseDN, group.DN, rid, st.asq, st.paged)); n != want {
					b.Fatalf("%d entries, want %d", n, want)
				}
			}
		})
	}
	strategies[0].set(d)
}

// benchNest creates, as the administrator, a group nesting All Staff, the five-deep
// chain, both cycles and the mixed group, and removes it when the benchmark ends.
func benchNest(b *testing.B, dc sambatest.DC) string {
	dn := "CN=dirgate-bench-nest," + smokeOU
	admin := dc.DialAdmin(b)
	add := goldap.NewAddRequest(dn, nil)
	add.Attribute("objectClass", []string{"group"})
	add.Attribute("member", []string{fixture.AllStaffDN, fixture.ITDepartmentDN, fixture.ProjectAlphaDN,
		fixture.SalesEastDN, fixture.MixedDN, fixture.NewsletterDN})
	if err := admin.Add(add); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultEntryAlreadyExists) {
		b.Fatalf("create %s: %v", dn, err)
	}
	b.Cleanup(func() {
		if err := dc.DialAdmin(b).Del(goldap.NewDelRequest(dn, nil)); err != nil {
			b.Errorf("delete %s: %v", dn, err)
		}
	})
	return dn
}

func BenchmarkListLargeIndirect(b *testing.B) {
	dc, d := benchDC(b)
	dn := benchNest(b, dc)
	id := dirgate.MustParseIdentifier(dn)
	svc := &dirgate.MemberService{Dir: d}
	ref, err := svc.List(context.Background(), dirgate.Principal{}, id, dirgate.ListOptions{IncludeIndirect: true})
	if err != nil {
		b.Fatal(err)
	}
	want := len(ref)
	b.Run("adapter/bfs", func(b *testing.B) {
		for b.Loop() {
			objs, err := svc.List(context.Background(), dirgate.Principal{}, id, dirgate.ListOptions{IncludeIndirect: true})
			if err != nil || len(objs) != want {
				b.Fatalf("%d objects, %v; want %d", len(objs), err, want)
			}
		}
	})
	b.Run("adapter/inchain", func(b *testing.B) {
		d.cfg.UseInChain = true
		g := mustLookup(b, d, dn)
		for b.Loop() {
			objs, err := d.TransitiveMembers(context.Background(), g, nil)
			if err != nil || len(objs) != want {
				b.Fatalf("%d objects, %v; want %d", len(objs), err, want)
			}
		}
	})
	b.Run("raw/bfs", func(b *testing.B) {
		c := dc.DialService(b)
		start := mustLookup(b, d, dn)
		for b.Loop() {
			// Breadth first over ASQ, one group at a time, visited by objectGUID.
			seen := map[string]bool{start.GUID: true}
			level := []dirgate.Object{start}
			n := 0
			for len(level) > 0 {
				var next []dirgate.Object
				for _, g := range level {
					rid, _ := d.domainRID(g.SID)
					for _, e := range rawMembers(b, c, dc.BaseDN, g.DN, rid, true, false) {
						guid := ldapentry.GUIDFromBytes(e.GetRawAttributeValue("objectGUID"))
						if seen[guid] {
							continue
						}
						seen[guid] = true
						n++
						for _, oc := range e.GetAttributeValues("objectClass") {
							if oc == "group" {
								next = append(next, dirgate.Object{GUID: guid, DN: e.DN, SID: sidOf(e)})
							}
						}
					}
				}
				level = next
			}
			if n != want {
				b.Fatalf("%d objects, want %d", n, want)
			}
		}
	})
}

func sidOf(e *goldap.Entry) string {
	s, _ := ldapentry.SIDFromBytes(e.GetRawAttributeValue("objectSid"))
	return s
}
