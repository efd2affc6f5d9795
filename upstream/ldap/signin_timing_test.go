package ldap

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// TestSignInTiming measures how long CheckPassword takes against the harness DC to
// refuse a wrong password of an existing account and an unknown user, in both
// forms (docs/auth.md, "Unknown users"). It is a measurement, not a check, so it
// runs only when asked:
//
//	DIRGATE_SIGNIN_TIMING=1 go test -count=1 -run TestSignInTiming -v ./upstream/ldap/
//
// The harness domain locks an account after 3 bad passwords (test/harness/samba/README.md),
// so the wrong passwords go to timingUsers accounts this test creates, at most 2
// each. The cases are interleaved, in an order that rotates every round, so that
// drift in the DC's or the machine's load falls on all of them alike.
func TestSignInTiming(t *testing.T) {
	if os.Getenv("DIRGATE_SIGNIN_TIMING") == "" {
		t.Skip("a measurement: set DIRGATE_SIGNIN_TIMING=1 to run it")
	}
	const (
		rounds      = 30
		perUser     = 2 // under the harness's lockout threshold of 3
		timingUsers = rounds / perUser
	)
	dc := sambatest.Env(t)
	d := openDC(t, dcConfig(dc))
	ctx := context.Background()
	netbios := strings.ToUpper(strings.SplitN(dnsDomain(dc.BaseDN), ".", 2)[0])
	domain := dnsDomain(dc.BaseDN)

	upns := make([]string, timingUsers)
	for i := range upns {
		_, upns[i] = dc.TempUser(t, tempSAM(fmt.Sprintf("t%02d", i)), signInPassword, nil)
	}
	_, warmUPN := dc.TempUser(t, tempSAM("tw"), signInPassword, nil)

	type kase struct {
		name  string
		login func(i int) string
	}
	cases := []kase{
		{"wrong password, existing user (UPN)", func(i int) string { return upns[i/perUser] }},
		{"unknown user (UPN)", func(i int) string { return fmt.Sprintf("nobody%d-%d@%s", os.Getpid()%100000, i, domain) }},
		{`unknown user (DOMAIN\user)`, func(i int) string { return fmt.Sprintf(`%s\nobody%d-%d`, netbios, os.Getpid()%100000, i) }},
	}
	check := func(name string) time.Duration {
		t.Helper()
		n := mustName(t, name)
		start := time.Now()
		_, err := d.CheckPassword(ctx, n, "Wrong-Password-9")
		took := time.Since(start)
		if reasonOf(err) != dirgate.ReasonInvalidCredentials {
			t.Fatalf("%s: %v, want invalidCredentials", name, err)
		}
		return took
	}

	// Warm up: the service pool, the NetBIOS name (read at the first down-level
	// sign-in), the user dialer's TLS set-up.
	if _, err := d.CheckPassword(ctx, mustName(t, warmUPN), signInPassword); err != nil {
		t.Fatalf("warm-up sign-in: %v", err)
	}
	check(warmUPN)
	for _, c := range cases[1:] {
		check(c.login(-1))
	}

	// The lookup alone (as the service account; no bind, so no lockout), to tell how
	// much of a difference is the lookup and how much the bind.
	lookup := func(name string) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := d.resolve(ctx, mustName(t, name)); err != nil {
			t.Fatalf("lookup %s: %v", name, err)
		}
		return time.Since(start)
	}

	took := make([][]time.Duration, len(cases))
	looked := make([][]time.Duration, len(cases))
	for i := range rounds {
		for j := range cases {
			k := (i + j) % len(cases)
			took[k] = append(took[k], check(cases[k].login(i)))
		}
		for j := range cases {
			k := (i + j) % len(cases)
			looked[k] = append(looked[k], lookup(cases[k].login(i)))
		}
	}

	report := func(what string, took [][]time.Duration) {
		t.Helper()
		var medians []time.Duration
		for k, c := range cases {
			st := timingStats(took[k])
			medians = append(medians, st.median)
			t.Logf("%s, %-36s n=%d  median %s  p90 %s  min %s  max %s  mean %s", what, c.name, len(took[k]),
				ms(st.median), ms(st.p90), ms(st.min), ms(st.max), ms(st.mean))
		}
		for k := 1; k < len(cases); k++ {
			t.Logf("%s, median of %q / median of %q: %.2f", what, cases[k].name, cases[0].name, float64(medians[k])/float64(medians[0]))
		}
	}
	report("CheckPassword", took)
	report("lookup only", looked)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

type stats struct{ median, p90, min, max, mean time.Duration }

// timingStats: the median (the mean of the two middle values for an even count)
// and the nearest-rank 90th percentile.
func timingStats(d []time.Duration) stats {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	n := len(s)
	return stats{median: (s[(n-1)/2] + s[n/2]) / 2, p90: s[(n*9+9)/10-1], min: s[0], max: s[n-1], mean: sum / time.Duration(n)}
}
