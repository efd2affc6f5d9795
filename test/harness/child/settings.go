package child

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// NewToken returns a random token that no file or log holds yet, so that a test can
// search for it afterwards.
func NewToken(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// WriteTokens writes a tokens file holding only SHA-256 hashes: token -> subject.
func WriteTokens(t testing.TB, tokens map[string]string) string {
	t.Helper()
	var b strings.Builder
	keys := make([]string, 0, len(tokens))
	for k := range tokens {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, tok := range keys {
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&b, "- sha256: %s\n  subject: %q\n", hex.EncodeToString(sum[:]), tokens[tok])
	}
	return WriteFile(t, "tokens.yaml", b.String())
}

// WriteFile writes content to a new file, mode 0600, in a temporary directory.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// LDAPArgs are the flags that serve the harness DC at ldapURL (the DC's own URL or a
// fault proxy's) with the given tokens file.
func LDAPArgs(t testing.TB, dc sambatest.DC, ldapURL, tokensFile string) []string {
	t.Helper()
	pw := WriteFile(t, "ldap-password", dc.Password)
	return []string{"--upstream", "ldap", "--ldap-url", ldapURL, "--ldap-bind-dn", dc.BindDN,
		"--ldap-password-file", pw, "--ldap-base-dn", dc.BaseDN, "--ldap-ca-file", dc.CAFile,
		"--tokens-file", tokensFile}
}

// ProxyDC starts a fault proxy in front of the DC's LDAPS port and returns it with
// the URL that makes dirgate go through it. The DC's certificate names 127.0.0.1,
// so the TLS connection through the proxy is still fully verified.
func ProxyDC(t testing.TB, dc sambatest.DC) (*faultproxy.Proxy, string) {
	t.Helper()
	target := strings.TrimPrefix(dc.URL, "ldaps://")
	p := faultproxy.Start(t, target)
	return p, fmt.Sprintf("ldaps://127.0.0.1:%d", p.Port())
}

// RequireFixture fails the test when the DC was started without the project fixture,
// whose groups the fault tests list.
func RequireFixture(t testing.TB, dc sambatest.DC) {
	t.Helper()
	if dc.FixtureDir == "" {
		t.Fatal("child: the DC was started without the project fixture (test/harness/samba/dc.sh seeds it when present)")
	}
}

// propertyNames are real AD attributes for PropsFor's combinations.
var propertyNames = []string{
	"mail", "description", "telephoneNumber", "title", "department", "company", "givenName",
	"sn", "sAMAccountName", "userPrincipalName", "whenCreated", "whenChanged", "info", "manager",
}

// PropsFor returns a properties parameter ("&properties=…") different for every i
// below 2^14: a listing with it is never in any cache, so it reaches the directory.
func PropsFor(i int) string {
	var names []string
	for b, n := range propertyNames {
		if i&(1<<b) != 0 {
			names = append(names, n)
		}
	}
	names = append(names, "cn") // never empty
	return "&properties=" + strings.Join(names, ",")
}

// TempGroup is sambatest's DC.TempGroup: a group of the test's own.
func TempGroup(t testing.TB, dc sambatest.DC, name string, members ...string) string {
	t.Helper()
	return dc.TempGroup(t, name, members...)
}

// Members reads a group's member values as the administrator, sorted, lower-cased:
// the ground truth that tests compare before and after.
func Members(t testing.TB, dc sambatest.DC, group string) []string {
	t.Helper()
	admin := dc.DialAdmin(t)
	res, err := admin.Search(goldap.NewSearchRequest(group, goldap.ScopeBaseObject, goldap.NeverDerefAliases,
		0, 0, false, "(objectClass=*)", []string{"member"}, nil))
	if err != nil {
		t.Fatalf("child: read members of %s: %v", group, err)
	}
	var out []string
	for _, e := range res.Entries {
		for _, m := range e.GetAttributeValues("member") {
			out = append(out, strings.ToLower(m))
		}
	}
	sort.Strings(out)
	return out
}
