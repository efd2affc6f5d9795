package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// post sends a POST with a JSON body, as the product's clients do.
func post(t *testing.T, u, token, contentType, body string) response {
	t.Helper()
	r, err := tryPost(u, token, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryPost is post for goroutines other than the test's.
func tryPost(u, token, contentType, body string) (response, error) {
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Adm-Authorization", token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}, err
}

func addBody(group, member string) string {
	b, _ := json.Marshal(map[string]string{"group": group, "newMember": member})
	return string(b)
}

func listed(objs []dirgate.Object, dn string) bool {
	for _, o := range objs {
		if strings.EqualFold(o.DN, dn) {
			return true
		}
	}
	return false
}

// TestEndToEndAddLDAP: two dirgate instances share one Redis in front of the Samba
// DC. An addition through one is visible at once through the other, in the group's
// own listings and in nested listings of the group that contains it, with and
// without properties; adding again changes nothing; the directory agrees.
func TestEndToEndAddLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		t.Fatal("the DC was started without the project fixture (test/harness/samba/dc.sh seeds it when present)")
	}
	srv := redistest.Start(t)
	a := startLDAP(t, dc, withRedis(t, srv.Addr())...)
	b := startLDAP(t, dc, withRedis(t, srv.Addr())...)

	// parent ⊃ child ⊃ Nora; extra holds Ada, and is added to child below.
	extra := dc.TempGroup(t, "dirgate add extra", fixture.DisabledDN)
	child := dc.TempGroup(t, "dirgate add child", fixture.NeverExpiresDN)
	parent := dc.TempGroup(t, "dirgate add parent", child)

	views := []struct{ group, extra string }{
		{child, ""}, {child, "&properties=mail"},
		{parent, "&includeIndirect=true"}, {parent, "&includeIndirect=true&properties=memberOf"},
	}
	// Every view cached on both instances before the addition. The change feed
	// reports the groups just created a moment later and invalidates them once, so
	// a view is listed again until it is a hit.
	for _, base := range []string{a, b} {
		for _, v := range views {
			deadline := time.Now().Add(15 * time.Second)
			for {
				listAs(t, base, "e2e-admin", v.group, v.extra)
				r := call(t, "GET", base+"?group="+url.QueryEscape(v.group)+v.extra, "e2e-admin")
				if r.header.Get("X-Dirgate-Cache") == "hit" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s%s not cached after 15 s: %s", v.group, v.extra, r.header.Get("X-Dirgate-Cache"))
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}

	for i, wantNoChanges := range []bool{false, true} {
		r := post(t, a, "e2e-admin", "application/json", addBody(child, fixture.RegularDN))
		var res dirgate.OperationResult
		if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 || res.NoChanges != wantNoChanges ||
			!strings.EqualFold(res.ActualObjectDN, child) {
			t.Fatalf("POST #%d: %d %s", i+1, r.status, r.body)
		}
		for _, base := range []string{b, a} {
			for _, v := range views {
				if objs := listAs(t, base, "e2e-admin", v.group, v.extra); !listed(objs, fixture.RegularDN) {
					t.Errorf("after POST #%d, %s%s on %s lacks the new member", i+1, v.group, v.extra, base)
				}
			}
		}
	}
	sameSet(t, "after the addition", ldapsearchDNs(t, dc, child, "base", "(objectClass=*)", "member"), []string{fixture.NeverExpiresDN, fixture.RegularDN})

	// A group added as a member: the nested listing through parent shows it and its
	// members on the other instance at once.
	if r := post(t, b, "e2e-admin", "application/json; charset=utf-8", addBody(child, extra)); r.status != 200 {
		t.Fatalf("POST of a group: %d %s", r.status, r.body)
	}
	nested := listAs(t, a, "e2e-admin", parent, "&includeIndirect=true")
	if !listed(nested, extra) || !listed(nested, fixture.DisabledDN) {
		t.Errorf("the nested listing of parent lacks the added group or its member: %v", dns(nested))
	}

	// Refusals in the error shape, before the directory is touched.
	for _, tt := range []struct {
		contentType, body string
		status            int
	}{
		{"text/plain", addBody(child, fixture.LockedDN), 415},
		{"application/json", addBody(fixture.RegularDN, fixture.LockedDN), 400}, // a user is no group
		{"application/json", addBody(child, child), 400},
		{"application/json", `{"group":"` + child + `"}`, 400},
		{"application/json", addBody(child, "CN=Nobody,"+dc.BaseDN), 404},
	} {
		r := post(t, a, "e2e-admin", tt.contentType, tt.body)
		if r.status != tt.status || !bytes.Contains(r.body, []byte(`"code"`)) {
			t.Errorf("POST %s (%s): %d %s, want %d", tt.body, tt.contentType, r.status, r.body, tt.status)
		}
	}
	sameSet(t, "after the refusals", ldapsearchDNs(t, dc, child, "base", "(objectClass=*)", "member"), []string{fixture.NeverExpiresDN, fixture.RegularDN, extra})
}

// TestConcurrentAddAndRemoveLDAP: an addition and a removal of the same member race
// through two instances sharing Redis. Their answers must fit one order of the two
// changes, and afterwards the directory and both instances' listings must be in the
// state of the change that order puts last.
func TestConcurrentAddAndRemoveLDAP(t *testing.T) {
	dc := sambatest.Env(t)
	srv := redistest.Start(t)
	a := startLDAP(t, dc, withRedis(t, srv.Addr())...)
	b := startLDAP(t, dc, withRedis(t, srv.Addr())...)
	group := dc.TempGroup(t, "dirgate race", fixture.NeverExpiresDN)
	member := fixture.RegularDN
	del := "?group=" + url.QueryEscape(group) + "&member=" + url.QueryEscape(member)

	change := func(r response) dirgate.OperationResult {
		var res dirgate.OperationResult
		if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || res.ResultType != 0 {
			t.Fatalf("answer %d %s", r.status, r.body)
		}
		return res
	}
	present := false
	orders := map[string]int{}
	defer func() { t.Logf("orders seen: %v", orders) }()
	for round := range 20 {
		for _, base := range []string{a, b} { // both instances cache the state before the race
			listAs(t, base, "e2e-admin", group, "")
		}
		var added response
		var postErr error
		done := make(chan struct{})
		go func() { // the addition through one instance, the removal through the other
			defer close(done)
			added, postErr = tryPost([]string{a, b}[round%2], "e2e-admin", "application/json", addBody(group, member))
		}()
		removed := call(t, "DELETE", []string{b, a}[round%2]+del, "e2e-admin")
		<-done
		if postErr != nil {
			t.Fatal(postErr)
		}
		add, rm := change(added), change(removed)
		// The two orders, and the answers each would give from the state before.
		addFirst := add.NoChanges == present && rm.NoChanges == false
		removeFirst := rm.NoChanges == !present && add.NoChanges == false
		switch {
		case addFirst && !removeFirst:
			present = false // the removal came last
			orders["removal last"]++
		case removeFirst && !addFirst:
			present = true // the addition came last
			orders["addition last"]++
		default:
			t.Fatalf("round %d: from present=%v, addition noChanges=%v and removal noChanges=%v fit no order", round, present, add.NoChanges, rm.NoChanges)
		}
		inDir := slices.ContainsFunc(ldapsearchDNs(t, dc, group, "base", "(objectClass=*)", "member"), func(d string) bool { return strings.EqualFold(d, member) })
		if inDir != present {
			t.Fatalf("round %d: the directory has the member: %v; the answers say %v", round, inDir, present)
		}
		for _, base := range []string{a, b} {
			if got := listed(listAs(t, base, "e2e-admin", group, ""), member); got != present {
				t.Fatalf("round %d: %s lists the member: %v; the answers say %v", round, base, got, present)
			}
		}
	}
}
