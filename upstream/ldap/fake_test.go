package ldap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// fakeServer is an in-memory directory that answers the searches and modifies the
// adapter sends, the way AD or Samba would: base DNs in DN, <GUID=…> and <SID=…>
// form, ASQ, paging, range retrieval, the filters the adapter builds. Its knobs
// switch between AD and Samba behaviours. It exists to test the adapter's logic
// (paging loops, ranges, fallbacks, retries); the integration tests check the same
// paths against a real Samba DC.
type fakeServer struct {
	mu      sync.Mutex
	objects []*fakeObj
	vendor  string
	domain  string // DN of the domain naming context
	asq     bool
	// maxValRange > 0 cuts attributes with more values to a range, as AD does.
	maxValRange int
	// maxPage > 0 answers a non-paged search with more results with that many and
	// code 4, as AD does.
	maxPage int

	byKey    map[string]*fakeObj // DN key -> object
	searches []string            // "base|filter|attrs|controls" of every search, for assertions
	dials    atomic.Int32
	// failNext makes the next n requests fail with a network error and close their
	// connection, as a cut TCP connection does.
	failNext atomic.Int32
	// applyThenFail makes the next n Modifies take effect and then fail with a
	// network error, as a connection cut before the response does.
	applyThenFail atomic.Int32
	// closeAfterAnswer makes Modify answer normally and then close its connection,
	// as a server that drops an idle connection right after a reply does.
	closeAfterAnswer atomic.Bool
	// modifyErr, when set, answers every Modify.
	modifyErr error
	// hang makes searches block until their context ends, as an unresponsive
	// server does.
	hang atomic.Bool
	// hangDialled makes the searches of the first n connections dialled block, as
	// connections a firewall dropped without a reset do, while new ones answer.
	hangDialled atomic.Int32
	// refuse makes dials fail as a stopped server's refused connection does;
	// hangModify makes Modifies block until the connection closes.
	refuse, hangModify atomic.Bool
	// refuseNext makes the next n dials fail as refuse does, as a DC whose
	// service restarts for an instant.
	refuseNext atomic.Int32
	// name is the DC's name in its dsServiceName (DC1 when empty).
	name string
	// confidential are the lDAPDisplayNames of the schema's confidential attributes.
	confidential []string
	// created counts the foreign security principals a Modify created.
	created int
	// dnSyntax are the lDAPDisplayNames of the schema's attributes of other
	// syntaxes than an octet string, with their attributeSyntax: the schema search
	// returns those of a syntax its filter names.
	dnSyntax map[string]string
	// forest are the naming contexts of the forest's other domains, answered as
	// crossRef objects; phantoms are member values of objects those domains hold
	// (DN key -> object), which no search returns but which the extended DN
	// control renders with their GUID and SID, as AD's phantoms are.
	forest   []string
	phantoms map[string]*fakeObj
	// holdingFilters counts the searches for groups holding given members.
	holdingFilters int
}

type fakeObj struct {
	dn      string
	guid    string
	sid     string
	classes []string
	pgid    int
	member  []string
	attrs   map[string][]string
}

func newFakeServer() *fakeServer {
	return &fakeServer{vendor: "Samba Team (https://www.samba.org)", domain: "DC=corp,DC=example,DC=com", asq: true,
		confidential: []string{"msFVE-RecoveryPassword", "unixUserPassword"},
		dnSyntax: map[string]string{"member": "2.5.5.1", "msDS-RevealedUsers": "2.5.5.7", "distinguishedName": "2.5.5.1",
			"objectCategory": "2.5.5.1", "msDS-RevealedList": "2.5.5.14", "objectSid": "2.5.5.17", "sIDHistory": "2.5.5.17",
			"mS-DS-CreatorSID": "2.5.5.17", "nTSecurityDescriptor": "2.5.5.15",
			"msDS-AllowedToActOnBehalfOfOtherIdentity": "2.5.5.15", "description": "2.5.5.12"}}
}

func (s *fakeServer) add(o *fakeObj) *fakeObj {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects = append(s.objects, o)
	if s.byKey == nil {
		s.byKey = map[string]*fakeObj{}
	}
	s.byKey[dirgate.MustParseDN(o.dn).Key()] = o
	return o
}

func (s *fakeServer) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.searches...)
}

func (s *fakeServer) dial(context.Context) (conn, error) {
	s.dials.Add(1)
	if s.refuse.Load() || s.refuseNext.Add(-1) >= 0 {
		return nil, fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	}
	return &fakeConn{s: s, gone: make(chan struct{}), n: s.dials.Load()}, nil
}

// fakeConn is one connection to a fakeServer.
type fakeConn struct {
	s      *fakeServer
	n      int32 // the dial's number
	closed atomic.Bool
	gone   chan struct{} // closed by Close
	once   sync.Once
}

func (c *fakeConn) IsClosing() bool { return c.closed.Load() }
func (c *fakeConn) Close() error {
	c.closed.Store(true)
	c.once.Do(func() {
		if c.gone != nil {
			close(c.gone)
		}
	})
	return nil
}

func (c *fakeConn) injected() error {
	if c.closed.Load() {
		return goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: connection closed"))
	}
	for {
		n := c.s.failNext.Load()
		if n <= 0 {
			return nil
		}
		if c.s.failNext.CompareAndSwap(n, n-1) {
			c.closed.Store(true)
			return goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: response channel closed"))
		}
	}
}

func (c *fakeConn) Modify(req *goldap.ModifyRequest) error {
	if err := c.injected(); err != nil {
		return err
	}
	if c.s.hangModify.Load() && c.gone != nil {
		<-c.gone
		return goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: connection closed"))
	}
	err := c.s.modify(req)
	if c.s.closeAfterAnswer.Load() {
		c.closed.Store(true)
	}
	if n := c.s.applyThenFail.Load(); n > 0 && c.s.applyThenFail.CompareAndSwap(n, n-1) {
		c.closed.Store(true)
		return goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: response channel closed"))
	}
	return err
}

func (s *fakeServer) modify(req *goldap.ModifyRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modifyErr != nil {
		return s.modifyErr
	}
	g := s.find(req.DN)
	if len(g) != 1 {
		return goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("no such base DN"))
	}
	for _, ch := range req.Changes {
		if ch.Modification.Type != "member" || (ch.Operation != goldap.DeleteAttribute && ch.Operation != goldap.AddAttribute) {
			return goldap.NewError(goldap.LDAPResultUnwillingToPerform, errors.New("fake: unsupported change"))
		}
		if ch.Operation == goldap.AddAttribute {
			if err := s.addMembers(g[0], ch.Modification.Vals); err != nil {
				return err
			}
			continue
		}
		if !contains(g[0].classes, "group") {
			return goldap.NewError(goldap.LDAPResultNoSuchAttribute, errors.New("no member attribute"))
		}
		for _, v := range ch.Modification.Vals {
			i := indexFold(g[0].member, v)
			if i < 0 {
				return goldap.NewError(goldap.LDAPResultUnwillingToPerform, errors.New("Attribute member doesn't exist"))
			}
			g[0].member = append(g[0].member[:i], g[0].member[i+1:]...)
		}
	}
	return nil
}

// addMembers answers an add of member values as Samba does (measured): 65 on a
// non-group, 32 for a DN that names nothing, 68 for a value already there or a member
// whose primary group this is.
func (s *fakeServer) addMembers(g *fakeObj, vals []string) error {
	if !contains(g.classes, "group") {
		return goldap.NewError(goldap.LDAPResultObjectClassViolation, errors.New("attribute 'member' does not exist in the specified objectclasses"))
	}
	for _, v := range vals {
		m := s.find(v)
		if sid, ok := strings.CutPrefix(v, "<SID="); ok && len(m) == 0 && strings.HasPrefix(sid, "S-1-5-21-") {
			m = []*fakeObj{s.createFSP(strings.TrimSuffix(sid, ">"))}
		}
		if len(m) != 1 {
			return goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("specified dn doesn't exist"))
		}
		if strings.HasPrefix(v, "<") {
			v = m[0].dn // the server stores the object's DN, whatever form named it
		}
		if rid, _ := ldapentry.RID(g.sid); indexFold(g.member, v) >= 0 || (m[0].pgid != 0 && m[0].pgid == rid) {
			return goldap.NewError(goldap.LDAPResultEntryAlreadyExists, errors.New("Attribute member already exists"))
		}
		g.member = append(g.member, v)
	}
	return nil
}

// createFSP makes the foreign security principal for sid, as Samba does for a
// member value <SID=…> that names no object (measured: docs/directory.md, "Several
// domains: what the directory shows"); the caller holds s.mu.
func (s *fakeServer) createFSP(sid string) *fakeObj {
	s.created++
	o := &fakeObj{dn: "CN=" + sid + ",CN=ForeignSecurityPrincipals," + s.domain, sid: sid,
		guid: fmt.Sprintf("%08x-0000-4000-8000-0000000f5b00", s.created), classes: []string{"foreignSecurityPrincipal"}}
	s.objects = append(s.objects, o)
	s.byKey[dirgate.MustParseDN(o.dn).Key()] = o
	return o
}

func (c *fakeConn) SearchAsync(ctx context.Context, req *goldap.SearchRequest, _ int) goldap.Response {
	if err := c.injected(); err != nil {
		return &fakeResponse{err: err}
	}
	if c.s.hang.Load() || c.n <= c.s.hangDialled.Load() {
		return &fakeResponse{ctx: ctx}
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var ctl []string
	for _, x := range req.Controls {
		ctl = append(ctl, x.GetControlType())
	}
	s.searches = append(s.searches, strings.Join([]string{req.BaseDN, req.Filter, strings.Join(req.Attributes, ","), strings.Join(ctl, ",")}, "|"))
	objs, err := s.match(req)
	if err != nil {
		return &fakeResponse{err: err}
	}
	r := &fakeResponse{}
	if p, ok := goldap.FindControl(req.Controls, goldap.ControlTypePaging).(*goldap.ControlPaging); ok {
		off := 0
		if len(p.Cookie) > 0 {
			off, _ = strconv.Atoi(string(p.Cookie))
		}
		end := min(off+int(p.PagingSize), len(objs))
		next := ""
		if end < len(objs) {
			next = strconv.Itoa(end)
		}
		objs = objs[off:end]
		r.done = []goldap.Control{&goldap.ControlPaging{PagingSize: p.PagingSize, Cookie: []byte(next)}}
	} else if s.maxPage > 0 && len(objs) > s.maxPage && req.BaseDN != "" {
		objs = objs[:s.maxPage]
		r.err = goldap.NewError(goldap.LDAPResultSizeLimitExceeded, errors.New("size limit exceeded"))
	}
	ext := goldap.FindControl(req.Controls, goldap.ControlTypeMicrosoftExtendedDN) != nil
	for _, o := range objs {
		e := s.entry(o, req.Attributes)
		if ext {
			s.extend(e)
		}
		r.items = append(r.items, fakeItem{entry: e})
	}
	if req.Scope == goldap.ScopeWholeSubtree {
		r.items = append(r.items, fakeItem{ref: "ldaps://corp.example.com/CN=Configuration," + s.domain})
	}
	return r
}

var (
	reSimple   = regexp.MustCompile(`^\(([A-Za-z]+)=([^()]*)\)$`)
	reInChain  = regexp.MustCompile(`^\(memberOf:1\.2\.840\.113556\.1\.4\.1941:=([^()]*)\)$`)
	rePrimaryN = regexp.MustCompile(`\(primaryGroupID=(\d+)\)`)
	reMember   = regexp.MustCompile(`\(member=([^()]*)\)`)
)

// match evaluates a request; the caller holds s.mu.
func (s *fakeServer) match(req *goldap.SearchRequest) ([]*fakeObj, error) {
	if req.BaseDN == "" && req.Scope == goldap.ScopeBaseObject {
		return []*fakeObj{{dn: "", attrs: map[string][]string{
			"supportedControl":     s.controls(),
			"defaultNamingContext": {s.domain},
			"namingContexts": {s.domain, "CN=Configuration," + s.domain, "CN=Schema,CN=Configuration," + s.domain,
				"DC=DomainDnsZones," + s.domain},
			"vendorName":                 {s.vendor},
			"schemaNamingContext":        {"CN=Schema,CN=Configuration," + s.domain},
			"configurationNamingContext": {"CN=Configuration," + s.domain},
			"dsServiceName":              {"CN=NTDS Settings,CN=" + cmpOr(s.name, "DC1") + ",CN=Servers,CN=Default-First-Site-Name,CN=Sites,CN=Configuration," + s.domain},
		}}}, nil
	}
	if strings.HasPrefix(req.Filter, "(&(objectClass=attributeSchema)(|(searchFlags:1.2.840.113556.1.4.803:=128)") &&
		req.BaseDN == "CN=Schema,CN=Configuration,"+s.domain {
		var out []*fakeObj
		for _, n := range s.confidential {
			syntax := cmpOr(s.dnSyntax[n], "2.5.5.10")
			out = append(out, &fakeObj{dn: "CN=" + n + "," + req.BaseDN, attrs: map[string][]string{"lDAPDisplayName": {n},
				"searchFlags": {"640"}, "attributeSyntax": {syntax}}})
		}
		for n, syntax := range s.dnSyntax {
			if !slices.Contains(s.confidential, n) && strings.Contains(req.Filter, "(attributeSyntax="+syntax+")") {
				out = append(out, &fakeObj{dn: "CN=" + n + "," + req.BaseDN, attrs: map[string][]string{"lDAPDisplayName": {n},
					"searchFlags": {"0"}, "attributeSyntax": {syntax}}})
			}
		}
		return out, nil
	}
	if req.Filter == crossRefFilter && req.BaseDN == "CN=Partitions,CN=Configuration,"+s.domain {
		var out []*fakeObj
		for i, nc := range append([]string{s.domain}, s.forest...) {
			out = append(out, &fakeObj{dn: fmt.Sprintf("CN=D%d,%s", i, req.BaseDN), attrs: map[string][]string{"nCName": {nc}}})
		}
		return out, nil
	}
	if inner, ok := strings.CutPrefix(req.Filter, "(&(objectClass=group)(|"); ok {
		ms := reMember.FindAllStringSubmatch(inner, -1)
		if len(ms) == 0 || !strings.HasSuffix(inner, "))") {
			return nil, goldap.NewError(goldap.LDAPResultFilterError, fmt.Errorf("fake: unsupported filter %q", req.Filter))
		}
		s.holdingFilters++
		return s.where(func(o *fakeObj) bool {
			for _, m := range ms {
				if indexFold(o.classes, "group") >= 0 && indexFold(o.member, unescape(m[1])) >= 0 {
					return true
				}
			}
			return false
		}), nil
	}
	if req.Scope == goldap.ScopeBaseObject {
		base := s.find(req.BaseDN)
		switch {
		case len(base) == 0 && strings.Contains(req.BaseDN, "OU=bad syntax"):
			return nil, goldap.NewError(goldap.LDAPResultInvalidDNSyntax, errors.New("invalid basedn"))
		case len(base) == 0:
			return nil, goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("not found"))
		case len(base) > 1:
			return nil, goldap.NewError(goldap.LDAPResultNoSuchObject, errors.New("Duplicate base-DN matches found"))
		}
		asq := goldap.FindControl(req.Controls, oidASQ)
		if asq == nil {
			return base, nil
		}
		if !s.asq {
			return nil, goldap.NewError(goldap.LDAPResultUnavailableCriticalExtension, errors.New("unsupported critical extension"))
		}
		switch v := asq.(*goldap.ControlString).ControlValue; v[4:] {
		case "member":
			return s.byDNs(base[0].member), nil
		case "memberOf":
			return s.where(func(o *fakeObj) bool { return indexFold(o.member, base[0].dn) >= 0 }), nil
		}
		return nil, goldap.NewError(goldap.LDAPResultInvalidAttributeSyntax, errors.New("bad ASQ attribute"))
	}
	f := req.Filter
	if m := reInChain.FindStringSubmatch(f); m != nil {
		return s.transitive(unescape(m[1])), nil
	}
	if strings.HasPrefix(f, "(primaryGroupID=") || strings.HasPrefix(f, "(|(primaryGroupID=") {
		rids := map[int]bool{}
		for _, m := range rePrimaryN.FindAllStringSubmatch(f, -1) {
			n, _ := strconv.Atoi(m[1])
			rids[n] = true
		}
		return s.where(func(o *fakeObj) bool { return rids[o.pgid] }), nil
	}
	if inner, ok := strings.CutPrefix(f, "(&(objectClass=user)"); ok {
		// The sign-in's account lookup: one attribute, among users.
		m := reSimple.FindStringSubmatch(strings.TrimSuffix(inner, ")"))
		if m == nil {
			return nil, goldap.NewError(goldap.LDAPResultFilterError, fmt.Errorf("fake: unsupported filter %q", f))
		}
		base := dirgate.MustParseDN(req.BaseDN)
		return s.where(func(o *fakeObj) bool {
			return indexFold(o.classes, "user") >= 0 && indexFold(o.attrs[m[1]], unescape(m[2])) >= 0 &&
				(dirgate.MustParseDN(o.dn).EqualFold(base) || dirgate.MustParseDN(o.dn).IsDescendantOf(base))
		}), nil
	}
	m := reSimple.FindStringSubmatch(f)
	if m == nil {
		return nil, goldap.NewError(goldap.LDAPResultFilterError, fmt.Errorf("fake: unsupported filter %q", f))
	}
	v := unescape(m[2])
	switch m[1] {
	case "memberOf":
		groups := s.find(v)
		return s.where(func(o *fakeObj) bool {
			for _, g := range groups {
				if indexFold(g.member, o.dn) >= 0 {
					return true
				}
			}
			return false
		}), nil
	case "member":
		return s.where(func(o *fakeObj) bool { return indexFold(o.member, v) >= 0 }), nil
	case "objectSid":
		return s.where(func(o *fakeObj) bool { return o.sid != "" && string(mustSIDBytes(o.sid)) == v }), nil
	}
	return nil, goldap.NewError(goldap.LDAPResultFilterError, fmt.Errorf("fake: unsupported filter %q", f))
}

// extend writes e's DN and member values in the extended DN form (<GUID=…>;<SID=…>;DN)
// that the extended DN control asks for; the caller holds s.mu.
func (s *fakeServer) extend(e *goldap.Entry) {
	form := func(dn string) string {
		o := s.phantoms[dirgate.MustParseDN(dn).Key()]
		if found := s.find(dn); len(found) == 1 {
			o = found[0]
		}
		if o == nil {
			return dn
		}
		out := "<GUID=" + o.guid + ">;"
		if o.sid != "" {
			out += "<SID=" + o.sid + ">;"
		}
		return out + dn
	}
	e.DN = form(e.DN)
	for _, a := range e.Attributes {
		if n, _, _ := strings.Cut(a.Name, ";"); strings.EqualFold(n, "member") {
			for i, v := range a.ByteValues {
				a.ByteValues[i] = []byte(form(string(v)))
			}
			a.Values = nil
			for _, v := range a.ByteValues {
				a.Values = append(a.Values, string(v))
			}
		}
	}
}

func (s *fakeServer) controls() []string {
	c := []string{goldap.ControlTypePaging}
	if s.asq {
		c = append(c, oidASQ)
	}
	return c
}

// find resolves a base DN in any of its three forms.
func (s *fakeServer) find(base string) []*fakeObj {
	switch {
	case strings.HasPrefix(base, "<GUID="):
		g := strings.TrimSuffix(strings.TrimPrefix(base, "<GUID="), ">")
		return s.where(func(o *fakeObj) bool { return o.guid == g })
	case strings.HasPrefix(base, "<SID="):
		sid := strings.TrimSuffix(strings.TrimPrefix(base, "<SID="), ">")
		return s.where(func(o *fakeObj) bool { return o.sid == sid })
	}
	want, err := dirgate.ParseDN(base)
	if o, ok := s.byKey[want.Key()]; ok && err == nil {
		return []*fakeObj{o}
	}
	return nil
}

func (s *fakeServer) where(pred func(*fakeObj) bool) []*fakeObj {
	var out []*fakeObj
	for _, o := range s.objects {
		if pred(o) {
			out = append(out, o)
		}
	}
	return out
}

func (s *fakeServer) byDNs(dns []string) []*fakeObj {
	var out []*fakeObj
	for _, dn := range dns {
		out = append(out, s.find(dn)...)
	}
	return out
}

// transitive follows member links breadth first, as the in-chain rule does (the
// start group included when a cycle leads back to it).
func (s *fakeServer) transitive(dn string) []*fakeObj {
	var out []*fakeObj
	seen := map[*fakeObj]bool{}
	queue := s.find(dn)
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		for _, m := range s.byDNs(g.member) {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
				queue = append(queue, m)
			}
		}
	}
	return out
}

// entry renders o with the requested attributes, ranging member as AD does.
func (s *fakeServer) entry(o *fakeObj, attrs []string) *goldap.Entry {
	e := &goldap.Entry{DN: o.dn}
	addRaw := func(name string, vals ...[]byte) { e.Attributes = append(e.Attributes, attr(name, vals)) }
	for _, a := range attrs {
		switch name, opt, _ := strings.Cut(a, ";"); strings.ToLower(name) {
		case "objectguid":
			if o.guid != "" {
				b, _ := ldapentry.GUIDToBytes(o.guid)
				addRaw("objectGUID", b)
			}
		case "objectsid":
			if o.sid != "" {
				addRaw("objectSid", mustSIDBytes(o.sid))
			}
		case "objectclass":
			var v [][]byte
			for _, c := range append([]string{"top"}, o.classes...) {
				v = append(v, []byte(c))
			}
			addRaw("objectClass", v...)
		case "primarygroupid":
			if o.pgid != 0 {
				addRaw("primaryGroupID", []byte(strconv.Itoa(o.pgid)))
			}
		case "member":
			s.addMember(e, o, opt)
		default:
			if v, ok := o.attrs[a]; ok {
				var raw [][]byte
				for _, x := range v {
					raw = append(raw, []byte(x))
				}
				addRaw(a, raw...)
			}
		}
	}
	return e
}

func (s *fakeServer) addMember(e *goldap.Entry, o *fakeObj, opt string) {
	vals := o.member
	lo, hi := 0, len(vals)-1
	ranged := false
	if opt != "" {
		r, _, err := parseRange("member;" + opt)
		if err != nil {
			return
		}
		ranged, lo = true, r.low
		if !r.last {
			hi = min(r.high, hi)
		}
	}
	if s.maxValRange > 0 && hi-lo+1 > s.maxValRange {
		hi, ranged = lo+s.maxValRange-1, true
		if opt == "" {
			e.Attributes = append(e.Attributes, attr("member", nil))
		}
	}
	if lo > len(vals) {
		return
	}
	var raw [][]byte
	for _, v := range vals[lo : hi+1] {
		raw = append(raw, []byte(v))
	}
	name := "member"
	if ranged {
		end := strconv.Itoa(hi)
		if hi == len(vals)-1 {
			end = "*"
		}
		name = fmt.Sprintf("member;range=%d-%s", lo, end)
	}
	e.Attributes = append(e.Attributes, attr(name, raw))
}

// attr builds an attribute as go-ldap decodes one: both string and byte values.
func attr(name string, vals [][]byte) *goldap.EntryAttribute {
	a := &goldap.EntryAttribute{Name: name, ByteValues: vals}
	for _, v := range vals {
		a.Values = append(a.Values, string(v))
	}
	return a
}

type fakeItem struct {
	entry *goldap.Entry
	ref   string
}

// fakeResponse replays a search's results as go-ldap's SearchAsync delivers them:
// entries and references, then the done message's controls, then the error.
type fakeResponse struct {
	ctx   context.Context // set: block until it ends, then end silently
	items []fakeItem
	done  []goldap.Control
	err   error
	i     int
	cur   fakeItem
	ctl   []goldap.Control
	fin   bool
}

func (r *fakeResponse) Next() bool {
	if r.ctx != nil {
		<-r.ctx.Done()
		return false
	}
	if r.i < len(r.items) {
		r.cur, r.ctl = r.items[r.i], nil
		r.i++
		return true
	}
	if r.err == nil && len(r.done) > 0 && !r.fin {
		r.fin, r.cur, r.ctl = true, fakeItem{}, r.done
		return true
	}
	return false
}
func (r *fakeResponse) Entry() *goldap.Entry       { return r.cur.entry }
func (r *fakeResponse) Referral() string           { return r.cur.ref }
func (r *fakeResponse) Controls() []goldap.Control { return r.ctl }
func (r *fakeResponse) Err() error {
	if r.i < len(r.items) {
		return nil
	}
	return r.err
}

func unescape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+2 < len(v) {
			n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
			if err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

func mustSIDBytes(sid string) []byte {
	b, err := ldapentry.SIDToBytes(sid)
	if err != nil {
		panic(err)
	}
	return b
}

func contains(list []string, s string) bool { return indexFold(list, s) >= 0 }

func indexFold(list []string, s string) int {
	for i, x := range list {
		if strings.EqualFold(x, s) {
			return i
		}
	}
	return -1
}

// newFakeDirectory opens a Directory over srv the way Open does, minus TLS.
func newFakeDirectory(srv *fakeServer, cfg Config) (*Directory, error) {
	cfg.BaseDN = cmpOr(cfg.BaseDN, srv.domain)
	cfg = cfg.withDefaults()
	d := newDirectory(cfg, dirgate.MustParseDN(cfg.BaseDN), []target{{url: "ldaps://fake:636", addr: "fake:636", implicitTLS: true}},
		func(t target) *server { return &server{t: t, pool: newPool(cfg.PoolSize, cfg.IdleTimeout, srv.dial)} })
	d.now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	return d, d.discover(context.Background())
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
