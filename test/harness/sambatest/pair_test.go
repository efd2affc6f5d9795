package sambatest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// replicationBound is how long a change may take to reach the other DC.
// pair.sh sets dreplsrv:notify_interval=1; measured 1–2.3 s on a loaded
// 2-core machine.
const replicationBound = 15 * time.Second

// TestPair proves what failover tests rely on in the two DCs of
// test/harness/samba/pair.sh. Subtests change the DCs' state and restore it; they
// run one after the other.
func TestPair(t *testing.T) {
	p := PairFromEnv(t)

	t.Run("each DC presents its own certificate", func(t *testing.T) {
		for n := 1; n <= 2; n++ {
			other := p.Names[2-n]
			if err := tlsHandshake(p, n, p.Names[n-1]); err != nil {
				t.Errorf("DC%d verified as %s: %v", n, p.Names[n-1], err)
			}
			if err := tlsHandshake(p, n, p.Host(n)); err != nil {
				t.Errorf("DC%d verified as %s: %v", n, p.Host(n), err)
			}
			if err := tlsHandshake(p, n, other); err == nil {
				t.Errorf("DC%d's certificate verified as %s: each DC must have its own", n, other)
			}
			// Both DCs hold the service account (DC2's by replication).
			p.DC(n).DialService(t)
		}
	})

	t.Run("SRV lookup through either DC's DNS returns both DCs", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, server := range p.DNSServers {
			checkLocator(ctx, t, p, server)
		}
	})

	t.Run("a change on either DC reaches the other", func(t *testing.T) {
		dn := tempPairGroup(t, p, "repl")
		took := changeAndWait(t, p, dn, 1, 2, "from DC1")
		t.Logf("DC1 -> DC2 in %v", took)
		took = changeAndWait(t, p, dn, 2, 1, "from DC2")
		t.Logf("DC2 -> DC1 in %v", took)
	})

	t.Run("pause-inbound holds a change back, resume releases it", func(t *testing.T) {
		dn := tempPairGroup(t, p, "pause")
		p.PauseInbound(t, 2)
		setDescription(t, p, 1, dn, "while paused")
		// Longer than the replication measured without the pause.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if got := description(t, p, 2, dn); got == "while paused" {
				t.Fatalf("DC2 received the change while its inbound replication was paused")
			}
			time.Sleep(250 * time.Millisecond)
		}
		start := time.Now()
		p.ResumeInbound(t, 2)
		waitDescription(t, p, 2, dn, "while paused", 30*time.Second)
		t.Logf("DC2 received the held change %v after resume-inbound", time.Since(start).Round(time.Millisecond))
	})

	t.Run("linkdown makes a connect hang, linkup restores it", func(t *testing.T) {
		addr := net.JoinHostPort(p.Host(2), "636")
		p.LinkDown(t, 2)
		start := time.Now()
		c, err := (&net.Dialer{Timeout: 2 * time.Second}).Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("connect to %s succeeded with the link down", addr)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < 1900*time.Millisecond {
			t.Fatalf("connect to %s with the link down: %v after %v, want a timeout after 2s", addr, err, time.Since(start))
		}
		// The other DC is untouched.
		p.DC(1).DialService(t)
		p.LinkUp(t, 2)
		p.DC(2).DialService(t)
	})

	t.Run("delay makes each round trip late, undelay restores it, open connections cut", func(t *testing.T) {
		open := p.DC(2).DialService(t)
		p.Delay(t, 2, 300*time.Millisecond)
		if _, err := open.Search(rootDSE()); err == nil {
			t.Error("a connection opened before delay still answers: it was not cut")
		}
		start := time.Now()
		c := p.DC(2).DialService(t) // TLS handshake and bind: several round trips
		if d := time.Since(start); d < time.Second {
			t.Errorf("dial and bind to the delayed DC2 took %v, want over a second", d)
		}
		start = time.Now()
		if _, err := c.Search(rootDSE()); err != nil {
			t.Fatalf("search through the delay: %v", err)
		}
		if d := time.Since(start); d < 600*time.Millisecond || d > 3*time.Second {
			t.Errorf("one search through a 300 ms delay each way took %v, want about 600 ms", d)
		}
		start = time.Now()
		p.DC(1).DialService(t) // the other DC is untouched
		if d := time.Since(start); d > time.Second {
			t.Errorf("dial and bind to DC1 took %v while DC2 was delayed", d)
		}
		p.Undelay(t, 2)
		start = time.Now()
		p.DC(2).DialService(t)
		if d := time.Since(start); d > time.Second {
			t.Errorf("dial and bind to DC2 took %v after undelay", d)
		}
	})

	t.Run("kill refuses connects, start brings the DC back with its data", func(t *testing.T) {
		dn := tempPairGroup(t, p, "kill")
		addr := net.JoinHostPort(p.Host(2), "636")
		p.Kill(t, 2)
		c, err := (&net.Dialer{Timeout: 2 * time.Second}).Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("connect to %s succeeded after kill", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("connect to %s after kill: %v, want connection refused", addr, err)
		}
		// A change made while DC2 is down reaches it after the restart.
		setDescription(t, p, 1, dn, "while DC2 was down")
		p.Start(t, 2)
		waitDescription(t, p, 2, dn, "while DC2 was down", 30*time.Second)
	})
}

// checkLocator asks the DNS server at server for the DC locator's SRV records
// and the DCs' A records.
func checkLocator(ctx context.Context, t *testing.T, p Pair, server string) {
	t.Helper()
	r := ResolverAt(server)
	for _, name := range []string{"dc._msdcs." + p.Domain, p.Site + "._sites.dc._msdcs." + p.Domain} {
		_, srvs, err := r.LookupSRV(ctx, "ldap", "tcp", name)
		if err != nil {
			t.Fatalf("%s: SRV _ldap._tcp.%s: %v", server, name, err)
		}
		var got []string
		for _, s := range srvs {
			got = append(got, fmt.Sprintf("%s:%d", strings.TrimSuffix(s.Target, "."), s.Port))
		}
		slices.Sort(got)
		want := []string{p.Names[0] + ":389", p.Names[1] + ":389"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: SRV _ldap._tcp.%s = %v, want %v", server, name, got, want)
		}
	}
	for n := 1; n <= 2; n++ {
		addrs, err := r.LookupHost(ctx, p.Names[n-1])
		if err != nil || !slices.Equal(addrs, []string{p.Host(n)}) {
			t.Errorf("%s: A %s = %v (%v), want [%s]", server, p.Names[n-1], addrs, err, p.Host(n))
		}
	}
}

func tlsHandshake(p Pair, n int, serverName string) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(p.Host(n), "636"),
		&tls.Config{RootCAs: p.CAPool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return c.Close()
}

// tempPairGroup creates a group on DC1, waits until DC2 holds it too, and
// deletes it when the test ends.
func tempPairGroup(t *testing.T, p Pair, name string) string {
	t.Helper()
	dn := fmt.Sprintf("CN=pair-%s-%d,CN=Users,%s", name, os.Getpid(), p.BaseDN)
	admin := p.DC(1).DialAdmin(t)
	_ = admin.Del(ldap.NewDelRequest(dn, nil)) // left over by a killed run
	add := ldap.NewAddRequest(dn, nil)
	add.Attribute("objectClass", []string{"top", "group"})
	add.Attribute("description", []string{"created"})
	if err := admin.Add(add); err != nil {
		t.Fatalf("create %s on DC1: %v", dn, err)
	}
	t.Cleanup(func() { p.AdminModify(t, 1, "dn: "+dn+"\nchangetype: delete\n") })
	waitDescription(t, p, 2, dn, "created", replicationBound)
	return dn
}

func setDescription(t *testing.T, p Pair, n int, dn, value string) {
	t.Helper()
	p.AdminModify(t, n, fmt.Sprintf("dn: %s\nchangetype: modify\nreplace: description\ndescription: %s\n", dn, value))
}

// description reads dn's description on DC n ("" when absent).
func description(t *testing.T, p Pair, n int, dn string) string {
	t.Helper()
	conn := p.DC(n).DialAdmin(t)
	defer conn.Close()
	e, err := baseSearch(conn, dn, "(objectClass=*)", "description")
	if err != nil {
		var le *ldap.Error
		if errors.As(err, &le) && le.ResultCode == ldap.LDAPResultNoSuchObject {
			return ""
		}
		t.Fatalf("read %s on DC%d: %v", dn, n, err)
	}
	return e.GetAttributeValue("description")
}

func waitDescription(t *testing.T, p Pair, n int, dn, want string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := description(t, p, n, dn)
		if got == want {
			return time.Since(start).Round(time.Millisecond)
		}
		if time.Since(start) > bound {
			t.Fatalf("DC%d: description of %s is %q after %v, want %q", n, dn, got, bound, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// changeAndWait changes dn's description on DC from and returns how long
// DC to took to show it.
func changeAndWait(t *testing.T, p Pair, dn string, from, to int, value string) time.Duration {
	t.Helper()
	start := time.Now()
	setDescription(t, p, from, dn, value)
	waitDescription(t, p, to, dn, value, replicationBound)
	return time.Since(start).Round(time.Millisecond)
}

// TestPairFrom checks the env contract's checks without a running pair.
func TestPairFrom(t *testing.T) {
	dir := t.TempDir()
	pw := dir + "/pw"
	if err := os.WriteFile(pw, []byte("Pw-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeCA(t, dir+"/ca.pem")
	full := map[string]string{
		VarPairDC1URL: "ldaps://10.231.77.11:636", VarPairDC2URL: "ldaps://10.231.77.12:636",
		VarPairDC1Name: "dc1.corp.example.com", VarPairDC2Name: "dc2.corp.example.com",
		VarPairDNS: "10.231.77.11:53", VarPairDomain: "corp.example.com", VarPairSite: "Default-First-Site-Name",
		VarPairBaseDN: "DC=corp,DC=example,DC=com", VarPairBindDN: "CN=svc,DC=corp,DC=example,DC=com",
		VarPairPasswordFile: pw, VarPairAdminDN: "CN=Administrator,DC=corp,DC=example,DC=com",
		VarPairAdminPasswordFile: pw, VarPairCAFile: dir + "/ca.pem", VarPairStateDir: dir,
		VarPairScript: "/x/pair.sh",
	}
	with := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return full[name]
		}
	}
	cases := []struct {
		name         string
		getenv       func(string) string
		skip, failed bool
	}{
		{"complete", with("", ""), false, false},
		{"nothing set", func(string) string { return "" }, true, false},
		{"nothing set under CI", func(k string) string {
			if k == "CI" {
				return "true"
			}
			return ""
		}, false, true},
		{"one missing", with(VarPairDNS, ""), false, true},
		{"public address", with(VarPairDC2URL, "ldaps://192.0.2.1:636"), false, true},
		{"plain ldap", with(VarPairDC1URL, "ldap://10.231.77.11:389"), false, true},
		{"DNS not IP:port", with(VarPairDNS, "dc1.corp.example.com"), false, true},
	}
	for _, tc := range cases {
		rec := &recordingTB{}
		p := pairFrom(rec, tc.getenv)
		if rec.skipped != tc.skip || rec.failed != tc.failed {
			t.Errorf("%s: skipped=%v failed=%v (%s), want skipped=%v failed=%v", tc.name, rec.skipped, rec.failed, rec.msg, tc.skip, tc.failed)
		}
		if !tc.skip && !tc.failed && (p.Host(2) != "10.231.77.12" || p.Password != "Pw-1") {
			t.Errorf("%s: got %+v", tc.name, p)
		}
	}
}

// rootDSE is a search of the root DSE, which any bound connection may read.
func rootDSE() *ldap.SearchRequest {
	return ldap.NewSearchRequest("", ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"defaultNamingContext"}, nil)
}
