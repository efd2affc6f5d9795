package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// account is a user of the suite's own, with its password for sign-in.
type account struct {
	DN, UPN, Password string
}

// fixture is the suite's own directory objects, in an OU of their own: the pool of
// users that the workload moves in and out of groups, disables and signs in; two
// callers that the tokens file names and nothing else touches; four groups, the
// second nested in the first; and the staleness probe's group and users.
type fixture struct {
	OU      string
	Users   []account // the pool
	Callers []account
	Groups  []string
	// Initial is each group's direct members when the run began, lower-cased.
	Initial map[string][]string
}

// poolSize and groupCount size the fixture: few enough values that writes and
// listings keep meeting each other.
const (
	poolSize   = 6
	groupCount = 4
)

// initialMembers are the groups' members at the start, as indexes: users by number,
// groups as -1-index (group 1 is in group 0).
var initialMembers = [groupCount][]int{
	{0, 1, -2},
	{2, 3},
	{4, 5, 0},
	{1, 3},
}

// The staleness probe: a group of its own (f.Groups[groupCount]) whose members,
// probeUsers users of their own (f.Users[poolSize:]), only the probe process
// changes, so that its changes stand alone long enough for the checker to measure
// how long listings missed them (docs/chaos.md, "What the report counts").
// probeInitial are its members at the start, as indexes among the probe users.
const probeUsers = 6

var probeInitial = []int{0, 1, 2}

// nestPairs are the (outer, inner) groups the direct changers nest and unnest: inner
// groups never hold groups, so no cycle can form.
var nestPairs = [][2]int{{0, 1}, {3, 2}}

// newFixture creates the fixture on DC1 under OU=dirgate-chaos-<pid>-<run>, waits
// until DC2 holds all of it (so a fault on DC1 cannot strand it), and deletes it when
// the test ends.
func newFixture(t *testing.T, pair sambatest.Pair, run string) *fixture {
	t.Helper()
	dc := pair.DC(1)
	admin := dc.DialAdmin(t)
	f := &fixture{OU: fmt.Sprintf("OU=dirgate-chaos-%d-%s,%s", os.Getpid(), run, pair.BaseDN), Initial: map[string][]string{}}
	domain := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(pair.BaseDN, "DC="), ",DC=", "."))
	deleteTree(admin, f.OU) // left over by a killed run
	var created []string
	t.Cleanup(func() { deleteAtEnd(t, dc, f.OU, created) })
	add := func(req *goldap.AddRequest) {
		t.Helper()
		if err := admin.Add(req); err != nil {
			t.Fatalf("create %s: %v", req.DN, err)
		}
		created = append(created, req.DN)
	}
	ou := goldap.NewAddRequest(f.OU, nil)
	ou.Attribute("objectClass", []string{"top", "organizationalUnit"})
	add(ou)
	newUser := func(name string) account {
		sam := fmt.Sprintf("ch%d%s%s", os.Getpid()%1000000, run, name)
		a := account{DN: fmt.Sprintf("CN=chaos %s,%s", name, f.OU), UPN: sam + "@" + domain, Password: "Chaos-" + randomHex(t, 8) + "-1"}
		req := goldap.NewAddRequest(a.DN, nil)
		req.Attribute("objectClass", []string{"top", "person", "organizationalPerson", "user"})
		req.Attribute("sAMAccountName", []string{sam})
		req.Attribute("userPrincipalName", []string{a.UPN})
		req.Attribute("unicodePwd", []string{utf16Quoted(a.Password)})
		req.Attribute("userAccountControl", []string{"512"})
		add(req)
		return a
	}
	for i := range poolSize {
		f.Users = append(f.Users, newUser(fmt.Sprintf("u%d", i)))
	}
	for i := range probeUsers {
		f.Users = append(f.Users, newUser(fmt.Sprintf("p%d", i)))
	}
	for i := range 2 {
		f.Callers = append(f.Callers, newUser(fmt.Sprintf("c%d", i)))
	}
	for i := range groupCount {
		f.Groups = append(f.Groups, fmt.Sprintf("CN=chaos g%d,%s", i, f.OU))
	}
	f.Groups = append(f.Groups, fmt.Sprintf("CN=chaos probe,%s", f.OU))
	// Inner groups first: a member value must name an existing object.
	for _, i := range []int{1, 2, 3, 0} {
		req := goldap.NewAddRequest(f.Groups[i], nil)
		req.Attribute("objectClass", []string{"top", "group"})
		var members []string
		for _, m := range initialMembers[i] {
			members = append(members, f.member(m))
		}
		req.Attribute("member", members)
		add(req)
		f.Initial[strings.ToLower(f.Groups[i])] = lower(members)
	}
	probe := goldap.NewAddRequest(f.Groups[groupCount], nil)
	probe.Attribute("objectClass", []string{"top", "group"})
	var probeMembers []string
	for _, m := range probeInitial {
		probeMembers = append(probeMembers, f.Users[poolSize+m].DN)
	}
	probe.Attribute("member", probeMembers)
	add(probe)
	f.Initial[strings.ToLower(f.Groups[groupCount])] = lower(probeMembers)
	second := pair.DC(2).DialAdmin(t)
	deadline := time.Now().Add(90 * time.Second)
	for _, dn := range created {
		for {
			got, err := readMembers(second, dn)
			want, isGroup := f.Initial[strings.ToLower(dn)]
			if err == nil && (!isGroup || equalSets(got, want)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DC2 does not hold %s as DC1 does after 90 s: %v %v", dn, got, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return f
}

// member is the DN of initialMembers' index m.
func (f *fixture) member(m int) string {
	if m < 0 {
		return f.Groups[-1-m]
	}
	return f.Users[m].DN
}

// deleteAtEnd deletes what newFixture created, last first, over a fresh connection
// (the test's may have been idle, and the DC restarted).
func deleteAtEnd(t *testing.T, dc sambatest.DC, ou string, created []string) {
	conn, err := dialAdmin(dc)
	if err != nil {
		t.Errorf("delete the fixture in %s: %v", ou, err)
		return
	}
	defer conn.Close()
	for i := len(created) - 1; i >= 0; i-- {
		if err := conn.Del(goldap.NewDelRequest(created[i], nil)); err != nil && !goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject) {
			t.Errorf("delete %s: %v", created[i], err)
		}
	}
}

// deleteTree removes ou and what it holds, one level of children (the fixture's
// shape), ignoring errors: it clears what a killed run left.
func deleteTree(conn *goldap.Conn, ou string) {
	res, err := conn.Search(goldap.NewSearchRequest(ou, goldap.ScopeSingleLevel, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
	if err != nil {
		return
	}
	for _, e := range res.Entries {
		_ = conn.Del(goldap.NewDelRequest(e.DN, nil))
	}
	_ = conn.Del(goldap.NewDelRequest(ou, nil))
}

// dialAdmin connects to dc as its administrator without failing the test: the
// workload's direct changes and the checks after faults must survive a DC that does
// not answer.
func dialAdmin(dc sambatest.DC) (*goldap.Conn, error) {
	conn, err := goldap.DialURL(dc.URL, goldap.DialWithTLSConfig(dc.TLSConfig()),
		goldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", dc.URL, err)
	}
	conn.SetTimeout(requestTimeout)
	if err := conn.Bind(dc.AdminDN, dc.AdminPassword); err != nil {
		conn.Close()
		return nil, fmt.Errorf("bind to %s: %w", dc.URL, err)
	}
	return conn, nil
}

// readMembers reads dn's member values (none for a user), lower-cased and sorted.
func readMembers(conn *goldap.Conn, dn string) ([]string, error) {
	res, err := conn.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=*)", []string{"member"}, nil))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dn, err)
	}
	if len(res.Entries) != 1 {
		return nil, fmt.Errorf("read %s: %d entries", dn, len(res.Entries))
	}
	return lower(res.Entries[0].GetAttributeValues("member")), nil
}

func lower(dns []string) []string {
	out := make([]string, len(dns))
	for i, dn := range dns {
		out[i] = strings.ToLower(dn)
	}
	sort.Strings(out)
	return out
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = lower(a), lower(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// utf16Quoted is a password as unicodePwd takes it: quoted, in UTF-16LE.
func utf16Quoted(pw string) string {
	var b []byte
	for _, r := range utf16.Encode([]rune(`"` + pw + `"`)) {
		b = append(b, byte(r), byte(r>>8))
	}
	return string(b)
}
