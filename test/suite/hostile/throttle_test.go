package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// TestTokenGuessing guesses tokens from one address and checks the throttle that
// proxy implements (docs/api.md, "Throttling of failed authentications"): with five
// failures allowed per minute, the sixth guess gets 429 tooManyRequests with a
// Retry-After within the window, while the valid token from that address is served
// (one address may be every client behind an ingress: bad tokens from anyone must
// not lock them out); another address is not affected; X-Forwarded-For does not
// move a client to another address; missing or repeated headers are not counted as
// guesses, over-long tokens are.
//
// Like the product (docs/compatibility.md, "The sign-in flow"), dirgate slows
// repeated failures down progressively before refusing them: from the third failure
// on, each 401 is held back 250 ms, then twice as long with each further one
// (docs/api.md).
func TestTokenGuessing(t *testing.T) {
	e := demoTarget(t, "--auth-max-failures", "5", "--auth-failure-window", "1m")
	ctx := context.Background()
	u := child.ListURL(e.p.Base, fixture.HelpDeskDN, "")
	from := func(ip string) *child.Client { return child.ClientFrom(ip) }
	guesser := from("127.0.0.1")

	var times []string
	for i := range 5 {
		r := guesser.Do(ctx, "GET", u, fmt.Sprintf("guess-%d", i))
		if r.Status != 401 {
			t.Fatalf("guess %d: %s, want 401", i+1, r)
		}
		times = append(times, r.Elapsed.Round(10*time.Microsecond).String())
		// A lower bound only: the answer is held at least this long by design.
		if min := [5]time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}[i]; r.Elapsed < min {
			t.Errorf("guess %d answered after %s, want at least %s (progressive slow-down)", i+1, r.Elapsed, min)
		}
	}
	t.Logf("the five failures were answered in %s", strings.Join(times, ", "))

	r := guesser.Do(ctx, "GET", u, "guess-6")
	checkThrottled(t, "sixth guess", r)
	if r := guesser.Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("the valid token from the guessing address: %s, want 200", r)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Adm-Authorization", "guess-7")
	req.Header.Set("X-Forwarded-For", "127.0.0.9")
	req.Header.Set("X-Real-IP", "127.0.0.9")
	checkThrottled(t, "a forwarded-for header from the guessing address", guesser.Send(req))

	if r := from("127.0.0.2").Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("another address with the valid token: %s, want 200", r)
	}

	// A client without a token, or with two, is misconfigured, not guessing.
	clumsy := from("127.0.0.3")
	for range 10 {
		if r := clumsy.Do(ctx, "GET", u, ""); r.Status != 401 {
			t.Fatalf("no token: %s", r)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Add("Adm-Authorization", "a")
		req.Header.Add("Adm-Authorization", "b")
		if r := clumsy.Send(req); r.Status != 401 {
			t.Fatalf("two tokens: %s", r)
		}
	}
	if r := clumsy.Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("after missing and repeated headers: %s, want 200 (they are not guesses)", r)
	}

	// A token too long to be looked at is still a guess.
	long := from("127.0.0.4")
	for i := range 5 {
		if r := long.Do(ctx, "GET", u, strings.Repeat("x", 5000+i)); r.Status != 401 {
			t.Fatalf("long token %d: %s", i+1, r)
		}
	}
	checkThrottled(t, "a sixth over-long token", long.Do(ctx, "GET", u, strings.Repeat("x", 6000)))
	if r := long.Do(ctx, "GET", u, e.token); r.Status != 200 {
		t.Errorf("the valid token after six over-long ones: %s, want 200", r)
	}
}

func checkThrottled(t *testing.T, what string, r child.Result) {
	t.Helper()
	if r.Status != 429 {
		t.Errorf("%s: %s, want 429", what, r)
		return
	}
	if _, err := child.CheckError(r); err != nil {
		t.Errorf("%s: %v", what, err)
	}
	s, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || s < 1 || s > 60 {
		t.Errorf("%s: Retry-After %q, want 1..60 seconds", what, r.Header.Get("Retry-After"))
	}
}

// TestSignInBurst sends 60 wrong passwords at once from one address: at most
// --auth-max-failures of them are checked (403), every other one is 429 with
// Retry-After (docs/auth.md, "Throttling": a check is counted before it is made,
// per address and account name, and checks in progress are bounded per address).
// The right password for that account from that address is then 429 too; another
// address is not affected. On the DC, where a
// check is a bind of milliseconds, the account's badPwdCount counts the checks:
// the limit there is 2, under the harness's lockout threshold of 3
// (test/harness/samba/README.md), and the account is the test's own.
func TestSignInBurst(t *testing.T) {
	t.Run("demo", func(t *testing.T) {
		e := demoTarget(t, "--auth-max-failures", "5", "--auth-failure-window", "1m")
		signInBurst(t, e, 5, "dana.admin@corp.example.com", "Demo-Admin-1", nil)
	})
	t.Run("dc", func(t *testing.T) {
		dc := sambatest.Env(t)
		e := dcTarget(t, "--auth-max-failures", "2", "--auth-failure-window", "1m")
		dn, upn := dc.TempUser(t, fmt.Sprintf("hburst%d", os.Getpid()%100000), "Burst-Right-1x", nil)
		signInBurst(t, e, 2, upn, "Burst-Right-1x", func() int {
			res, err := dc.DialAdmin(t).Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject, goldap.NeverDerefAliases, 0, 0, false,
				"(objectClass=*)", []string{"badPwdCount"}, nil))
			if err != nil || len(res.Entries) != 1 {
				t.Fatalf("read %s: %v", dn, err)
			}
			n, _ := strconv.Atoi(res.Entries[0].GetAttributeValue("badPwdCount"))
			return n
		})
	})
}

// signInBurst sends the burst for user to e and judges it against limit; binds,
// when set, returns the failed binds the directory counted.
func signInBurst(t *testing.T, e *target, limit int, user, password string, binds func() int) {
	create := strings.TrimSuffix(e.p.Base, "/api/directoryObjects/groupMembers") + "/api/authSessions/create"
	send := func(c *child.Client, password string) child.Result {
		b, _ := json.Marshal(map[string]string{"username": user, "password": password})
		req, err := http.NewRequestWithContext(context.Background(), "POST", create, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return c.Send(req)
	}
	const n = 60
	results := make([]child.Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := child.ClientFrom("127.0.0.5") // a connection each: nothing is serialised by the client
			<-start
			results[i] = send(c, fmt.Sprintf("Wrong-%d", i))
		}()
	}
	close(start)
	wg.Wait()
	codes := map[int]int{}
	for _, r := range results {
		codes[r.Status]++
		if r.Status == 429 {
			checkThrottled(t, "a sign-in of the burst", r)
		} else if r.Status != 403 {
			t.Errorf("a sign-in of the burst: %s, want 403 or 429", r)
		}
	}
	t.Logf("answers to %d wrong passwords at once: %v", n, codes)
	if codes[403] < 1 || codes[403] > limit {
		t.Errorf("%d wrong passwords were checked, want 1 to %d", codes[403], limit)
	}
	if binds != nil {
		if got := binds(); got != codes[403] {
			t.Errorf("the directory counted %d failed binds for %d answers 403 (limit %d)", got, codes[403], limit)
		}
	}
	if codes[403] == limit {
		checkThrottled(t, "the right password from the burst's address", send(child.ClientFrom("127.0.0.5"), password))
	}
	if r := send(child.ClientFrom("127.0.0.6"), password); r.Status != 200 {
		t.Errorf("the right password from another address: %s", r)
	}
}

// TestSignInLockOut: wrong passwords for one account from an address refuse that
// account's right password from there (429, without a check), and no other
// account's: behind an ingress one address is many people (docs/auth.md,
// "Throttling").
func TestSignInLockOut(t *testing.T) {
	e := demoTarget(t, "--auth-max-failures", "3", "--auth-failure-window", "1m")
	create := strings.TrimSuffix(e.p.Base, "/api/directoryObjects/groupMembers") + "/api/authSessions/create"
	send := func(user, password string) child.Result {
		b, _ := json.Marshal(map[string]string{"username": user, "password": password})
		req, err := http.NewRequestWithContext(context.Background(), "POST", create, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return child.ClientFrom("127.0.0.7").Send(req)
	}
	for i := range 3 {
		if r := send("dana.admin@corp.example.com", fmt.Sprintf("Wrong-%d", i)); r.Status != 403 {
			t.Fatalf("wrong password %d: %s", i+1, r)
		}
	}
	checkThrottled(t, "her right password from that address", send("dana.admin@corp.example.com", "Demo-Admin-1"))
	if r := send("hugo.helpdesk@corp.example.com", "Demo-Helpdesk-1"); r.Status != 200 {
		t.Errorf("another account's right password from that address: %s, want 200", r)
	}
}

// TestSignInSpray: one password tried against many names from one address is
// bounded whatever the names: with --auth-max-failures 2, an address may fail
// 5 × 2 checks a window (docs/auth.md, "Throttling"). A full-width spelling of a
// throttled name shares its count; once the address's failures across names are
// used up, another account's right password from there is 429 too, while a valid
// token from there is served and another address signs in.
func TestSignInSpray(t *testing.T) {
	e := demoTarget(t, "--auth-max-failures", "2", "--auth-failure-window", "1m")
	create := strings.TrimSuffix(e.p.Base, "/api/directoryObjects/groupMembers") + "/api/authSessions/create"
	send := func(ip, user, password string) child.Result {
		b, _ := json.Marshal(map[string]string{"username": user, "password": password})
		req, err := http.NewRequestWithContext(context.Background(), "POST", create, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return child.ClientFrom(ip).Send(req)
	}
	const sprayer = "127.0.0.8"
	for i := range 2 {
		if r := send(sprayer, "dana.admin@corp.example.com", fmt.Sprintf("Wrong-%d", i)); r.Status != 403 {
			t.Fatalf("wrong password %d: %s", i+1, r)
		}
	}
	checkThrottled(t, "her right password, her name in full width", send(sprayer, "ｄａｎａ.ａｄｍｉｎ@corp.example.com", "Demo-Admin-1"))
	for i := range 8 {
		if r := send(sprayer, fmt.Sprintf("sprayed%d@corp.example.com", i), "Winter2026!"); r.Status != 403 {
			t.Fatalf("sprayed name %d: %s", i+1, r)
		}
	}
	checkThrottled(t, "a fresh name after ten failures from the address", send(sprayer, "fresh@corp.example.com", "Winter2026!"))
	checkThrottled(t, "another account's right password from the address", send(sprayer, "hugo.helpdesk@corp.example.com", "Demo-Helpdesk-1"))
	if r := child.ClientFrom(sprayer).Do(context.Background(), "GET", child.ListURL(e.p.Base, fixture.HelpDeskDN, ""), e.token); r.Status != 200 {
		t.Errorf("a valid token from the spraying address: %s, want 200", r)
	}
	if r := send("127.0.0.9", "hugo.helpdesk@corp.example.com", "Demo-Helpdesk-1"); r.Status != 200 {
		t.Errorf("the right password from another address: %s, want 200", r)
	}
}
