package load

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goldap "github.com/go-ldap/ldap/v3"
)

// LDAPConfig reaches the domain controller: as the service account to read (the
// direct-LDAP baseline), as the administrator to create the load groups and re-add
// removed members.
type LDAPConfig struct {
	URL               string // ldaps://127.0.0.1:636, or ldap:// (always StartTLS)
	BaseDN            string
	BindDN            string
	PasswordFile      string
	AdminDN           string
	AdminPasswordFile string
	CAFile            string
}

// LDAPConfigFromEnv reads the variables test/harness/samba/dc.sh writes
// (DIRGATE_TEST_LDAP_*).
func LDAPConfigFromEnv(getenv func(string) string) (LDAPConfig, error) {
	c := LDAPConfig{
		URL: getenv("DIRGATE_TEST_LDAP_URL"), BaseDN: getenv("DIRGATE_TEST_LDAP_BASE_DN"),
		BindDN: getenv("DIRGATE_TEST_LDAP_BIND_DN"), PasswordFile: getenv("DIRGATE_TEST_LDAP_PASSWORD_FILE"),
		AdminDN: getenv("DIRGATE_TEST_LDAP_ADMIN_DN"), AdminPasswordFile: getenv("DIRGATE_TEST_LDAP_ADMIN_PASSWORD_FILE"),
		CAFile: getenv("DIRGATE_TEST_LDAP_CA_FILE"),
	}
	var missing []string
	for name, v := range map[string]string{"URL": c.URL, "BASE_DN": c.BaseDN, "BIND_DN": c.BindDN,
		"PASSWORD_FILE": c.PasswordFile, "ADMIN_DN": c.AdminDN, "ADMIN_PASSWORD_FILE": c.AdminPasswordFile, "CA_FILE": c.CAFile} {
		if v == "" {
			missing = append(missing, "DIRGATE_TEST_LDAP_"+name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("ldap config: %s not set (source the env file test/harness/samba/dc.sh writes)", strings.Join(missing, ", "))
	}
	if _, err := c.hostPort(); err != nil {
		return c, err
	}
	return c, nil
}

// hostPort checks that the directory is on loopback: load goes nowhere else.
func (c LDAPConfig) hostPort() (string, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "ldaps" && u.Scheme != "ldap") {
		return "", fmt.Errorf("ldap config: URL %q is not ldaps:// or ldap://", c.URL)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("ldap config: %s is not a loopback address", host)
	}
	return u.Host, nil
}

// Dial connects and binds as the service account, or as the administrator.
func (c LDAPConfig) Dial(admin bool) (*goldap.Conn, error) {
	dn, pwFile := c.BindDN, c.PasswordFile
	if admin {
		dn, pwFile = c.AdminDN, c.AdminPasswordFile
	}
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		return nil, fmt.Errorf("ldap dial: %w", err)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ldap dial: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ldap dial: no certificate in %s", c.CAFile)
	}
	u, _ := url.Parse(c.URL)
	tc := &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	conn, err := goldap.DialURL(c.URL, goldap.DialWithTLSConfig(tc),
		goldap.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("ldap dial %s: %w", c.URL, err)
	}
	if u.Scheme == "ldap" {
		if err := conn.StartTLS(tc); err != nil {
			conn.Close()
			return nil, fmt.Errorf("ldap starttls: %w", err)
		}
	}
	conn.SetTimeout(time.Minute)
	if err := conn.Bind(dn, strings.TrimSuffix(string(pw), "\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ldap bind as %s: %w", dn, err)
	}
	return conn, nil
}

// EnsureGroups creates ou and each group with exactly its members, or corrects the
// members of a group that exists (a run that stopped between a removal and its
// re-add leaves one out). Running it again changes nothing.
func EnsureGroups(conn *goldap.Conn, ou string, groups []GroupSpec) error {
	add := goldap.NewAddRequest(ou, nil)
	add.Attribute("objectClass", []string{"organizationalUnit"})
	if err := conn.Add(add); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultEntryAlreadyExists) {
		return fmt.Errorf("ensure %s: %w", ou, err)
	}
	for _, g := range groups {
		if err := ensureGroup(conn, g); err != nil {
			return err
		}
	}
	return nil
}

func ensureGroup(conn *goldap.Conn, g GroupSpec) error {
	res, err := conn.Search(goldap.NewSearchRequest(g.DN, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=group)", []string{"member"}, nil))
	if goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
		rdn := strings.TrimPrefix(strings.SplitN(g.DN, ",", 2)[0], "CN=")
		add := goldap.NewAddRequest(g.DN, nil)
		add.Attribute("objectClass", []string{"group"})
		add.Attribute("sAMAccountName", []string{"dg-" + strings.ToLower(strings.ReplaceAll(rdn, " ", "-"))})
		add.Attribute("groupType", []string{strconv.Itoa(-2147483646)}) // global security
		add.Attribute("member", g.Members)
		if err := conn.Add(add); err != nil {
			return fmt.Errorf("create %s: %w", g.DN, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", g.DN, err)
	}
	if len(res.Entries) != 1 {
		return fmt.Errorf("read %s: %d entries", g.DN, len(res.Entries))
	}
	have := map[string]string{}
	for _, m := range res.Entries[0].GetAttributeValues("member") {
		have[dnKey(m)] = m
	}
	want := map[string]bool{}
	mod := goldap.NewModifyRequest(g.DN, nil)
	var missing []string
	for _, m := range g.Members {
		want[dnKey(m)] = true
		if _, ok := have[dnKey(m)]; !ok {
			missing = append(missing, m)
		}
	}
	var extra []string
	for k, m := range have {
		if !want[k] {
			extra = append(extra, m)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	if len(missing) > 0 {
		mod.Add("member", missing)
	}
	if len(extra) > 0 {
		mod.Delete("member", extra)
	}
	if err := conn.Modify(mod); err != nil {
		return fmt.Errorf("correct members of %s: %w", g.DN, err)
	}
	return nil
}

// oidASQ is the Attribute Scoped Query control: a base search on the group returns
// the entries its member attribute names.
const oidASQ = "1.2.840.113556.1.4.1504"

// readAttrs are the attributes dirgate reads for an object (upstream/ldap's
// baseAttrs), so that both paths transfer the same data.
var readAttrs = []string{"objectGUID", "objectSid", "objectClass", "userAccountControl",
	"msDS-User-Account-Control-Computed", "accountExpires", "pwdLastSet",
	"msDS-UserPasswordExpiryTimeComputed", "primaryGroupID"}

// LDAPTarget issues each listing straight to the domain controller, as a program
// without dirgate would: on its own bound connection per client, the group's members
// with one Attribute Scoped Query and its primary-group members with a paged search,
// and for nested listings the same for every group found, breadth first. It gets no
// permission filtering; its answer is checked against the unfiltered listing's DNs.
type LDAPTarget struct {
	Config  LDAPConfig
	Checker *Checker
}

// Name is "ldap".
func (t *LDAPTarget) Name() string { return "ldap" }

// NewWorker dials and binds one connection.
func (t *LDAPTarget) NewWorker(context.Context) (Worker, error) {
	c, err := t.Config.Dial(false)
	if err != nil {
		return nil, err
	}
	return &ldapWorker{t: t, conn: c}, nil
}

type ldapWorker struct {
	t    *LDAPTarget
	conn *goldap.Conn
}

func (w *ldapWorker) Close() { w.conn.Close() }

func (w *ldapWorker) Do(ctx context.Context, op *Op, rec *Recorder) {
	if op.Kind != OpList {
		rec.AddError("unsupported", Outcome{Err: errors.New("the ldap target only lists")})
		return
	}
	start := time.Now()
	dns, size, err := w.members(op.Query)
	lat := time.Since(start)
	o := Outcome{Status: StatusLDAPOK, Want: StatusLDAPOK, Bytes: size}
	if err != nil {
		o.Status, o.Err = 0, err
	} else {
		o.Wrong = w.t.Checker.CheckDNs(op.Query, dns)
	}
	rec.Add("list", lat, o)
}

type groupRef struct {
	dn  string
	rid uint32
}

// members returns the DNs of q's listing, read from the directory, and the size of
// the entries' DNs and values.
func (w *ldapWorker) members(q Query) ([]string, int, error) {
	attrs := append(append([]string(nil), readAttrs...), q.Properties...)
	top, err := w.search(q.Group, goldap.ScopeBaseObject, "(objectClass=*)", []string{"objectSid"}, nil, false)
	if err != nil || len(top) != 1 {
		return nil, 0, fmt.Errorf("ldap: read group %s: %d entries, %w", q.Group, len(top), err)
	}
	seen := map[string]bool{dnKey(top[0].DN): true}
	var out []string
	size := 0
	level := []groupRef{{top[0].DN, rid(top[0])}}
	for len(level) > 0 {
		var next []groupRef
		for _, g := range level {
			entries, err := w.search(g.dn, goldap.ScopeBaseObject, "(objectClass=*)", attrs,
				[]goldap.Control{&goldap.ControlString{ControlType: oidASQ, Criticality: true, ControlValue: asqValue("member")}}, false)
			if err != nil {
				return nil, 0, fmt.Errorf("ldap: members of %s: %w", g.dn, err)
			}
			if g.rid != 0 {
				prim, err := w.search(w.t.Config.BaseDN, goldap.ScopeWholeSubtree,
					"(primaryGroupID="+strconv.FormatUint(uint64(g.rid), 10)+")", attrs, nil, true)
				if err != nil {
					return nil, 0, fmt.Errorf("ldap: primary-group members of %s: %w", g.dn, err)
				}
				entries = append(entries, prim...)
			}
			for _, e := range entries {
				size += entrySize(e)
				k := dnKey(e.DN)
				if seen[k] {
					continue
				}
				seen[k] = true
				out = append(out, e.DN)
				if q.Indirect && isGroup(e) {
					next = append(next, groupRef{e.DN, rid(e)})
				}
			}
		}
		level = next
	}
	return out, size, nil
}

func entrySize(e *goldap.Entry) int {
	n := len(e.DN)
	for _, a := range e.Attributes {
		for _, v := range a.ByteValues {
			n += len(v)
		}
	}
	return n
}

func (w *ldapWorker) search(base string, scope int, filter string, attrs []string, ctl []goldap.Control, paged bool) ([]*goldap.Entry, error) {
	req := goldap.NewSearchRequest(base, scope, goldap.NeverDerefAliases, 0, 0, false, filter, attrs, ctl)
	var res *goldap.SearchResult
	var err error
	if paged {
		res, err = w.conn.SearchWithPaging(req, 1000)
	} else {
		res, err = w.conn.Search(req)
	}
	if err != nil {
		return nil, err
	}
	return res.Entries, nil
}

// asqValue is the ASQ control's BER value: SEQUENCE { sourceAttribute OCTET STRING }.
func asqValue(attr string) string {
	return string(append([]byte{0x30, byte(len(attr) + 2), 0x04, byte(len(attr))}, attr...))
}

func isGroup(e *goldap.Entry) bool {
	for _, c := range e.GetAttributeValues("objectClass") {
		if strings.EqualFold(c, "group") {
			return true
		}
	}
	return false
}

// rid is the last sub-authority of the entry's binary objectSid, 0 without one.
func rid(e *goldap.Entry) uint32 {
	sid := e.GetRawAttributeValue("objectSid")
	if len(sid) < 12 || len(sid) != 8+4*int(sid[1]) {
		return 0
	}
	return binary.LittleEndian.Uint32(sid[len(sid)-4:])
}
