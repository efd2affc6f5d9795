package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestSignInBurstBinds: a burst of wrong passwords for one account from one
// address, spread over two replicas sharing Redis, binds at most
// DIRGATE_AUTH_MAX_FAILURES times in all, counted by the DC itself (the account's
// badPwdCount). The limit is 2, under the harness's lockout threshold of 3
// (test/harness/samba/README.md), so the account this test creates is never locked out
// when the bound holds.
func TestSignInBurstBinds(t *testing.T) {
	dc := sambatest.Env(t)
	srv := redistest.Start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("an e2e secret of at least thirty-two bytes\n"), 0o600)
	// The gate wide open: the count taken before each bind is what must hold.
	flags := []string{"--auth-max-failures", "2", "--signin-max-concurrent-per-client", "100", "--signin-max-concurrent", "100"}
	a := startSignIn(t, dc, srv.Addr(), secret, flags...)
	b := startSignIn(t, dc, srv.Addr(), secret, flags...)
	dn, upn := dc.TempUser(t, fmt.Sprintf("siburst%d", os.Getpid()%100000), "Burst-Right-1x", nil)

	const n = 30
	codes := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			root := a.root
			if i%2 == 1 {
				root = b.root
			}
			codes[i] = postJSON(t, root+"/api/authSessions/create", map[string]string{"username": upn, "password": "wrong-" + strconv.Itoa(i)}).status
		}()
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	admin := dc.DialAdmin(t)
	res, err := admin.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"badPwdCount", "lockoutTime"}, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("read %s: %v", dn, err)
	}
	binds, _ := strconv.Atoi(res.Entries[0].GetAttributeValue("badPwdCount"))
	t.Logf("answers %v, badPwdCount %d, lockoutTime %q", count, binds, res.Entries[0].GetAttributeValue("lockoutTime"))
	if binds > 2 || binds < 1 {
		t.Errorf("the burst made %d failed binds, want 1 or 2", binds)
	}
	if count[403] != binds || count[429] != n-binds {
		t.Errorf("answers %v for %d binds: want a 403 per bind and 429 for the rest", count, binds)
	}
}
