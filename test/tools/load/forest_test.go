package load

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// forestEnv is a complete forest env (the variables forest.sh writes), DCs on its
// bridge's private addresses.
func forestEnv() map[string]string {
	env := map[string]string{"DIRGATE_TEST_FOREST_CA_FILE": "/f/ca.pem",
		"DIRGATE_TEST_FOREST_CORP_UNIVERSAL_DN": "CN=cr-universal,OU=dirgate-forest,DC=corp,DC=example,DC=com",
		"DIRGATE_TEST_FOREST_CORP_USER_DN":      "CN=cr-user1,OU=dirgate-forest,DC=corp,DC=example,DC=com"}
	for dom, d := range map[string]struct{ ip, base string }{"CORP": {"10.231.93.11", "DC=corp,DC=example,DC=com"},
		"FABRIKAM": {"10.231.93.12", "DC=fabrikam,DC=example,DC=net"}} {
		p := "DIRGATE_TEST_FOREST_" + dom + "_"
		env[p+"URL"], env[p+"BASE_DN"] = "ldaps://"+d.ip+":636", d.base
		env[p+"BIND_DN"], env[p+"PASSWORD_FILE"] = "CN=dirgate-svc,CN=Users,"+d.base, "/f/svc.pw"
		env[p+"ADMIN_DN"], env[p+"ADMIN_PASSWORD_FILE"] = "CN=Administrator,CN=Users,"+d.base, "/f/admin.pw"
	}
	return env
}

func TestForestConfigFromEnv(t *testing.T) {
	fc, err := ForestConfigFromEnv(func(k string) string { return forestEnv()[k] })
	if err != nil {
		t.Fatal(err)
	}
	if fc.Corp.URL != "ldaps://10.231.93.11:636" || fc.Fabrikam.BaseDN != "DC=fabrikam,DC=example,DC=net" ||
		fc.Fabrikam.CAFile != "/f/ca.pem" || fc.Caller == "" || fc.CorpUniversal == "" {
		t.Errorf("config %+v", fc)
	}
	for _, tt := range []struct{ name, key, value, wantErr string }{
		// Load goes to loopback or the harness's private bridge, nowhere else.
		{"public DC", "DIRGATE_TEST_FOREST_FABRIKAM_URL", "ldaps://192.0.2.1:636", "FABRIKAM URL"},
		{"DC by name", "DIRGATE_TEST_FOREST_CORP_URL", "ldaps://corpdc.corp.example.com:636", "CORP URL"},
		{"not LDAP", "DIRGATE_TEST_FOREST_CORP_URL", "https://10.231.93.11", "CORP URL"},
		{"missing", "DIRGATE_TEST_FOREST_CORP_ADMIN_DN", "", "DIRGATE_TEST_FOREST_CORP_ADMIN_DN not set"},
		{"no caller", "DIRGATE_TEST_FOREST_CORP_USER_DN", "", "DIRGATE_TEST_FOREST_CORP_USER_DN not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := forestEnv()
			env[tt.key] = tt.value
			_, err := ForestConfigFromEnv(func(k string) string { return env[k] })
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Each pair's groups have the same size and nesting; the cross group holds half
// its members from FABRIKAM, the home group none; the users are shared.
func TestForestSetup(t *testing.T) {
	fc, err := ForestConfigFromEnv(func(k string) string { return forestEnv()[k] })
	if err != nil {
		t.Fatal(err)
	}
	s, err := fc.ForestSetup([]int{2, 200, 7, 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pairs) != 3 || len(s.Groups) != 6 {
		t.Fatalf("pairs %v, groups %d: want one pair per distinct size", s.Pairs, len(s.Groups))
	}
	if len(s.CorpUsers) != 199 || len(s.FabrikamUsers) != 100 {
		t.Errorf("%d CORP users, %d FABRIKAM users; want 199 and 100", len(s.CorpUsers), len(s.FabrikamUsers))
	}
	for i, p := range s.Pairs {
		cross, home := s.Groups[2*i], s.Groups[2*i+1]
		if cross.DN != p.Cross || home.DN != p.Home || p.Cross == p.Home {
			t.Fatalf("pair %v: groups %s, %s", p, cross.DN, home.DN)
		}
		if n := len(cross.Members) + len(cross.Foreign); n != p.Size || len(home.Members) != p.Size {
			t.Errorf("size %d: cross holds %d, home %d", p.Size, n, len(home.Members))
		}
		if len(cross.Foreign) != p.Size/2 || len(home.Foreign) != 0 {
			t.Errorf("size %d: %d and %d foreign members", p.Size, len(cross.Foreign), len(home.Foreign))
		}
		for _, g := range []ForestGroup{cross, home} {
			if g.Members[0] != fc.CorpUniversal {
				t.Errorf("%s does not nest CORP's Universal first: %v", g.DN, g.Members[:1])
			}
			for _, m := range g.Members {
				if !strings.HasSuffix(m, fc.Corp.BaseDN) {
					t.Errorf("%s: member %s is not CORP's", g.DN, m)
				}
			}
			for _, m := range g.Foreign {
				if !strings.HasSuffix(m, fc.Fabrikam.BaseDN) {
					t.Errorf("%s: foreign member %s is not FABRIKAM's", g.DN, m)
				}
			}
		}
	}
	if _, err := fc.ForestSetup([]int{200, 1}); err == nil {
		t.Error("size 1 accepted: a group holds CORP's Universal and a user")
	}
	var names []string
	for _, w := range s.ForestWorkloads() {
		names = append(names, w.Name)
		if err := w.Validate(); err != nil {
			t.Error(err)
		}
		if w.Ops[0].Query.Indirect != strings.HasSuffix(w.Name, "-nested") {
			t.Errorf("%s: includeIndirect %v", w.Name, w.Ops[0].Query.Indirect)
		}
	}
	want := []string{"cross2", "home2", "cross2-nested", "home2-nested", "cross200", "home200", "cross200-nested", "home200-nested",
		"cross7", "home7", "cross7-nested", "home7-nested"}
	if !slices.Equal(names, want) {
		t.Errorf("workloads %q, want %q", names, want)
	}
}

// CheckDomains refuses captured listings that do not span the domains as the
// groups do: a cross listing without its FABRIKAM members (listed as CORP's FSPs),
// a home listing with one.
func TestForestCheckDomains(t *testing.T) {
	fc, _ := ForestConfigFromEnv(func(k string) string { return forestEnv()[k] })
	s, err := fc.ForestSetup([]int{4})
	if err != nil {
		t.Fatal(err)
	}
	s.Callers[0].Token = "t"
	listing := func(fab, corp int) Captured {
		var objs []map[string]string
		for range fab {
			objs = append(objs, map[string]string{"domainName": "fabrikam.example.net"})
		}
		for range corp {
			objs = append(objs, map[string]string{"domainName": "corp.example.com"})
		}
		b, _ := json.Marshal(objs)
		return Captured{Body: b}
	}
	bodies := func(cross, home Captured) map[string]Captured {
		out := map[string]Captured{}
		for _, w := range s.ForestWorkloads() {
			c := home
			if strings.HasPrefix(w.Name, "cross") {
				c = cross
			}
			out[bareKey("t", w.Ops[0].Query.RawQuery())] = c
		}
		return out
	}
	if err := s.CheckDomains(bodies(listing(2, 2), listing(0, 4)), "fabrikam.example.net"); err != nil {
		t.Errorf("right listings refused: %v", err)
	}
	for name, b := range map[string]map[string]Captured{
		"cross listing shows FSPs": bodies(listing(0, 4), listing(0, 4)),
		"home listing spans":       bodies(listing(2, 2), listing(1, 3)),
		"not JSON":                 bodies(Captured{Body: []byte("<html>")}, listing(0, 4)),
		"missing":                  {},
	} {
		if err := s.CheckDomains(b, "fabrikam.example.net"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// PairedWorkloads pairs one target's runs of two workloads by repetition and
// ignores other targets and unpaired repetitions.
func TestPairedWorkloads(t *testing.T) {
	run := func(target, workload string, rep int, cpuPerReq, tput float64) *Report {
		return &Report{Target: target, Workload: workload, Repetition: rep, Elapsed: time.Second,
			All: Stats{Throughput: tput}, CPU: []ProcessCPU{{Name: target, PerRequest: cpuPerReq}, {Name: ClientProcess, PerRequest: 99}}}
	}
	reports := []*Report{
		run("dirgate", "cross", 0, 60, 900), run("dirgate", "home", 0, 50, 1000), run("bare", "cross", 0, 10, 5000),
		run("dirgate", "home", 1, 40, 1000), run("dirgate", "cross", 1, 40, 1100),
		run("dirgate", "cross", 2, 70, 800), // home's run of repetition 2 missing
	}
	cpu, tput := PairedWorkloads(reports, "dirgate", "cross", "home")
	if !slices.Equal(cpu, []float64{1.2, 1}) || !slices.Equal(tput, []float64{0.9, 1.1}) {
		t.Errorf("cpu %v, throughput %v; want [1.2 1] and [0.9 1.1]", cpu, tput)
	}
}
