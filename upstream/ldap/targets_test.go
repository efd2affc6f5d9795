package ldap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseTargets(t *testing.T) {
	dc1 := target{url: "ldaps://dc1.corp.example.com:636", addr: "dc1.corp.example.com:636", implicitTLS: true, serverName: "dc1.corp.example.com"}
	dc2 := target{url: "ldap://dc2.corp.example.com:389", addr: "dc2.corp.example.com:389", serverName: "dc2.corp.example.com"}
	tests := []struct {
		name, in string
		want     []target
	}{
		// One URL gives what parseURL gives, as before the list form.
		{"one", "ldaps://dc1.corp.example.com", []target{dc1}},
		{"two by space", "ldaps://dc1.corp.example.com ldap://dc2.corp.example.com", []target{dc1, dc2}},
		{"two by comma", "ldaps://dc1.corp.example.com,ldap://dc2.corp.example.com", []target{dc1, dc2}},
		// Separators mix and repeat; leading and trailing ones are ignored, as are
		// the tabs and newlines of a YAML block.
		{"mixed separators", " ,ldaps://dc1.corp.example.com ,, \t\nldap://dc2.corp.example.com, ", []target{dc1, dc2}},
		// The order given is the order of preference.
		{"order kept", "ldap://dc2.corp.example.com ldaps://dc1.corp.example.com", []target{dc2, dc1}},
		// Hosts are lower-cased: names compare case-insensitively.
		{"case", "LDAPS://DC1.Corp.Example.COM:636", []target{dc1}},
		{"ipv6", "ldaps://[::1]:1636", []target{{url: "ldaps://[::1]:1636", addr: "[::1]:1636", implicitTLS: true, serverName: "::1"}}},
		{"ipv6 canonical", "ldaps://[0:0::1]", []target{{url: "ldaps://[::1]:636", addr: "[::1]:636", implicitTLS: true, serverName: "::1"}}},
		// A fully qualified name keeps its dot (it is dialled as written).
		{"trailing dot", "ldap://dc2.corp.example.com.", []target{{url: "ldap://dc2.corp.example.com.:389", addr: "dc2.corp.example.com.:389", serverName: "dc2.corp.example.com."}}},
		{"underscore", "ldap://dc_2:389", []target{{url: "ldap://dc_2:389", addr: "dc_2:389", serverName: "dc_2"}}},
		{"ipv4", "ldap://127.0.0.1:1389", []target{{url: "ldap://127.0.0.1:1389", addr: "127.0.0.1:1389", serverName: "127.0.0.1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTargets(tt.in)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseTargets(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseTargetsRefuses(t *testing.T) {
	many := strings.Repeat("ldaps://dc.example.com ", maxTargets) // maxTargets duplicates
	var distinct []string
	for i := range maxTargets + 1 {
		distinct = append(distinct, fmt.Sprintf("ldaps://dc%d.example.com", i))
	}
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"empty", "", []string{"names no URL"}},
		{"separators only", " , ,\t", []string{"names no URL"}},
		// Errors name the item by position and value.
		{"bad item", "ldaps://dc1 http://dc2", []string{`item 2 of 2 ("http://dc2")`, "scheme"}},
		// Every bad item is reported.
		{"two bad items", "ldaps://u:p@dc1 ldaps://dc2 ldaps://", []string{`item 1 of 3 ("ldaps://u:p@dc1")`, `item 3 of 3 ("ldaps://")`, "no host"}},
		// The same server twice: the same address, whatever the case or the
		// spelling of the default port or of the scheme.
		{"duplicate", "ldaps://dc1 ldaps://DC1:636", []string{`item 2 of 2 ("ldaps://DC1:636"): the same server as item 1`}},
		{"duplicate across schemes", "ldap://dc1:636 ldaps://dc1", []string{"item 2 of 2", "the same server as item 1"}},
		{"duplicate ipv6 spelling", "ldaps://[::1] ldaps://[0::1]", []string{"the same server as item 1"}},
		{"duplicates", many, []string{"item 2 of 32", "item 32 of 32"}},
		{"too many", strings.Join(distinct, ","), []string{"names 33 URLs, more than 32"}},
		{"too long", "ldaps://" + strings.Repeat("a", maxURLListLength), []string{"more than 8192"}},
		{"port out of range", "ldaps://dc:65536", []string{"port", "65535"}},
		{"port zero", "ldaps://dc:0", []string{"port"}},
		{"duplicate fully qualified", "ldaps://dc1.corp.example.com ldaps://dc1.corp.example.com.", []string{"the same server as item 1"}},
		// Hosts are names or IP literals.
		{"colons", "ldap://::", []string{"host"}},
		{"empty label", "ldap://dc..corp", []string{"host", "label"}},
		{"odd characters", "ldap://dc!1", []string{"host", `'!'`}},
		// No certificate can match a zoned address.
		{"ipv6 zone", "ldaps://[fe80::1%25eth0]:636", []string{"zone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTargets(tt.in)
			if err == nil {
				t.Fatalf("parseTargets accepted %q: %+v", tt.in, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestParseTargetsBoundsErrors: an offending value is quoted, cut to
// maxShownLength, whatever it holds.
func TestParseTargetsBoundsErrors(t *testing.T) {
	long := "http://" + strings.Repeat("x", 1000)
	_, err := parseTargets(long)
	if err == nil {
		t.Fatal("accepted")
	}
	if len(err.Error()) > 300 || !strings.Contains(err.Error(), "…") {
		t.Errorf("error of %d bytes: %v", len(err.Error()), err)
	}
}

// fakeResolver answers LookupSRV from a table keyed by the name queried, and
// records the queries.
type fakeResolver struct {
	answers map[string][]*net.SRV
	errs    map[string]error
	queries []string
}

func (f *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	q := "_" + service + "._" + proto + "." + name
	f.queries = append(f.queries, q)
	return q + ".", f.answers[q], f.errs[q]
}

const (
	siteName   = "_ldap._tcp.hq._sites.dc._msdcs.corp.example.com"
	domainName = "_ldap._tcp.dc._msdcs.corp.example.com"
)

func srv(target string, port uint16) *net.SRV {
	return &net.SRV{Target: target, Port: port, Priority: 0, Weight: 100}
}

func startTLS(host string, port int) target {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	return target{url: "ldap://" + addr, addr: addr, serverName: host}
}

func TestDiscoverTargets(t *testing.T) {
	notFound := &net.DNSError{Err: "no such host", Name: siteName, IsNotFound: true}
	refused := &net.DNSError{Err: "server misbehaving", Name: domainName}
	tests := []struct {
		name        string
		site        string
		answers     map[string][]*net.SRV
		errs        map[string]error
		want        []target
		wantQueries []string
	}{
		// Without a site only the domain-wide records are read, in the
		// resolver's order, each reached with StartTLS on the record's port and
		// verified against its target without the trailing dot, lower-cased.
		{name: "domain only",
			answers:     map[string][]*net.SRV{domainName: {srv("DC2.corp.example.com.", 389), srv("dc1.corp.example.com.", 3268)}},
			want:        []target{startTLS("dc2.corp.example.com", 389), startTLS("dc1.corp.example.com", 3268)},
			wantQueries: []string{domainName}},
		// The site's DCs come first, then the domain's not already listed.
		{name: "site first", site: "hq",
			answers: map[string][]*net.SRV{
				siteName:   {srv("dc3.corp.example.com.", 389)},
				domainName: {srv("dc1.corp.example.com.", 389), srv("dc3.corp.example.com.", 389), srv("dc2.corp.example.com.", 389)},
			},
			want:        []target{startTLS("dc3.corp.example.com", 389), startTLS("dc1.corp.example.com", 389), startTLS("dc2.corp.example.com", 389)},
			wantQueries: []string{siteName, domainName}},
		// The same target on another port is another server.
		{name: "same host other port",
			answers: map[string][]*net.SRV{domainName: {srv("dc1.corp.example.com.", 389), srv("dc1.corp.example.com", 1389), srv("DC1.corp.example.com.", 389)}},
			want:    []target{startTLS("dc1.corp.example.com", 389), startTLS("dc1.corp.example.com", 1389)}},
		// "." means no service (RFC 2782); port 0 and names that are not host
		// names are skipped too.
		{name: "skipped records",
			answers: map[string][]*net.SRV{domainName: {srv(".", 389), srv("dc0.corp.example.com.", 0), srv("bad_name.corp.example.com.", 389), nil, srv("dc1.corp.example.com.", 389)}},
			want:    []target{startTLS("dc1.corp.example.com", 389)}},
		// A site without records of its own (or that does not exist) is no error.
		{name: "site not found", site: "hq",
			answers: map[string][]*net.SRV{domainName: {srv("dc1.corp.example.com.", 389)}},
			errs:    map[string]error{siteName: notFound},
			want:    []target{startTLS("dc1.corp.example.com", 389)}},
		// The site's DCs are enough when the domain-wide lookup fails.
		{name: "domain lookup fails", site: "hq",
			answers: map[string][]*net.SRV{siteName: {srv("dc3.corp.example.com.", 389)}},
			errs:    map[string]error{domainName: refused},
			want:    []target{startTLS("dc3.corp.example.com", 389)}},
		// The records returned beside an error (LookupSRV's malformed records)
		// are used.
		{name: "records beside an error",
			answers: map[string][]*net.SRV{domainName: {srv("dc1.corp.example.com.", 389)}},
			errs:    map[string]error{domainName: &net.DNSError{Err: "DNS response contained records which contain invalid names", Name: domainName}},
			want:    []target{startTLS("dc1.corp.example.com", 389)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeResolver{answers: tt.answers, errs: tt.errs}
			got, err := discoverTargets(context.Background(), r, "corp.example.com", tt.site, nil, nil)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("discoverTargets = %+v, %v; want %+v", got, err, tt.want)
			}
			if tt.wantQueries != nil && !reflect.DeepEqual(r.queries, tt.wantQueries) {
				t.Errorf("queries = %q; want %q", r.queries, tt.wantQueries)
			}
		})
	}
}

func TestDiscoverTargetsBound(t *testing.T) {
	var records []*net.SRV
	for i := range maxTargets + 10 {
		records = append(records, srv(fmt.Sprintf("dc%d.corp.example.com.", i), 389))
	}
	r := &fakeResolver{answers: map[string][]*net.SRV{domainName: records}}
	got, err := discoverTargets(context.Background(), r, "corp.example.com.", "", nil, nil)
	if err != nil || len(got) != maxTargets || got[maxTargets-1].serverName != fmt.Sprintf("dc%d.corp.example.com", maxTargets-1) {
		t.Fatalf("got %d targets, %v", len(got), err)
	}
}

func TestDiscoverTargetsFails(t *testing.T) {
	siteErr := &net.DNSError{Err: "no such host", Name: siteName, IsNotFound: true}
	domainErr := &net.DNSError{Err: "i/o timeout", Name: domainName, IsTimeout: true}
	t.Run("both lookups fail", func(t *testing.T) {
		r := &fakeResolver{errs: map[string]error{siteName: siteErr, domainName: domainErr}}
		_, err := discoverTargets(context.Background(), r, "corp.example.com", "hq", nil, nil)
		// Both causes are kept, for errors.Is/As and for the log.
		if !errors.Is(err, siteErr) || !errors.Is(err, domainErr) || !strings.Contains(err.Error(), "site hq") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no records", func(t *testing.T) {
		r := &fakeResolver{errs: map[string]error{siteName: siteErr}}
		_, err := discoverTargets(context.Background(), r, "corp.example.com", "hq", nil, nil)
		if err == nil || !strings.Contains(err.Error(), "DNS lists none") || !errors.Is(err, siteErr) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("only unusable records", func(t *testing.T) {
		r := &fakeResolver{answers: map[string][]*net.SRV{domainName: {srv(".", 0), srv("dc1.corp.example.com.", 0)}}}
		_, err := discoverTargets(context.Background(), r, "corp.example.com", "", nil, nil)
		if err == nil || !strings.Contains(err.Error(), "1 records skipped") {
			t.Errorf("err = %v", err)
		}
	})
	// Nothing odd reaches the resolver.
	for _, tc := range []struct{ domain, site string }{
		{"", ""}, {"corp..example.com", ""}, {"corp.example.com/x", ""}, {"-corp.example.com", ""},
		{"corp.example.com", "h.q"}, {"corp.example.com", "h q"}, {"corp.example.com", "_sites"},
		{strings.Repeat("a", 64) + ".com", ""}, {strings.Repeat("a.", 127) + "a", ""},
		{strings.Repeat("a.", 100) + "com", strings.Repeat("s", 63)}, // the site query exceeds 253
	} {
		r := &fakeResolver{}
		if _, err := discoverTargets(context.Background(), r, tc.domain, tc.site, nil, nil); err == nil || len(r.queries) != 0 {
			t.Errorf("domain %q site %q: err %v, queries %q", tc.domain, tc.site, err, r.queries)
		}
	}
}

// TestConfigTargets: Config.targets reads the list from URL, or asks the
// Resolver for the domain's records.
func TestConfigTargets(t *testing.T) {
	c := validConfig()
	c.URL = "ldaps://dc1.corp.example.com, ldaps://dc2.corp.example.com"
	got, err := c.targets(context.Background())
	if err != nil || len(got) != 2 || got[1].serverName != "dc2.corp.example.com" {
		t.Errorf("targets = %+v, %v", got, err)
	}
	// A resolver whose server refuses at once: the error comes from it, not
	// from the system's resolver.
	c.URL, c.Domain = "", "corp.example.com"
	c.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("test resolver: refused")
	}}
	if _, err := c.targets(context.Background()); err == nil || !strings.Contains(err.Error(), "test resolver: refused") {
		t.Errorf("discovery through Resolver: %v", err)
	}
}

// FuzzParseTargets: whatever the input, parseTargets either refuses it with a
// bounded error or returns a bounded, duplicate-free list of well-formed targets
// that parse back to themselves from their canonical URLs.
func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{
		"ldaps://dc1.corp.example.com", "ldap://dc1:389, ldaps://dc2", " ,ldaps://[::1]:636,,LDAP://DC", "ldaps://dc ldaps://DC:636",
		"http://x", "ldaps://u:p@dc", "ldaps://[fe80::1%25eth0]:636", "ldaps://[::ffff:127.0.0.1]", "ldaps://dc:99999", "", ",",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTargets(s)
		if err != nil {
			// Bounded: at most maxTargets items, each quoted to maxShownLength.
			if n := len(err.Error()); n > maxTargets*400 {
				t.Fatalf("error of %d bytes", n)
			}
			return
		}
		if len(got) == 0 || len(got) > maxTargets {
			t.Fatalf("%d targets", len(got))
		}
		seen := map[string]bool{}
		var urls []string
		for _, tg := range got {
			host, port, err := net.SplitHostPort(tg.addr)
			if err != nil || host != tg.serverName || host == "" || strings.ToLower(host) != host {
				t.Fatalf("target %+v: host %q, %v", tg, host, err)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				t.Fatalf("target %+v: port %q", tg, port)
			}
			scheme := map[bool]string{true: "ldaps", false: "ldap"}[tg.implicitTLS]
			if tg.url != scheme+"://"+tg.addr {
				t.Fatalf("target %+v: url is not scheme://addr", tg)
			}
			if seen[tg.addr] {
				t.Fatalf("duplicate %q in %+v", tg.addr, got)
			}
			seen[tg.addr] = true
			urls = append(urls, tg.url)
		}
		again, err := parseTargets(strings.Join(urls, " "))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("canonical URLs %q parse to %+v, %v; want %+v", urls, again, err, got)
		}
	})
}

// TestDiscoverTargetsWithinDomain: a target is used only when it is the domain or
// lies below it, label by label, or below a configured suffix, whatever the case
// and the trailing dot; the others are skipped.
func TestDiscoverTargetsWithinDomain(t *testing.T) {
	r := &fakeResolver{answers: map[string][]*net.SRV{domainName: {
		srv("dc.evil.example.", 389),               // another domain
		srv("corp.example.com.evil.example.", 389), // the domain as a prefix
		srv("xcorp.example.com.", 389),             // the domain as a string suffix, not a label suffix
		srv("example.com.", 389),                   // the domain's parent
		srv("DC1.Corp.Example.COM.", 389),          // within, in another case
		srv("corp.example.com", 389),               // the domain itself, no trailing dot
		srv("dc9.dcs.example.net.", 389),           // within a configured suffix
		srv("dc8.example.net.", 389),               // the suffix's parent domain
	}}}
	var log strings.Builder
	got, err := discoverTargets(context.Background(), r, "corp.example.com.", "", []string{"DCS.example.net."}, slog.New(slog.NewTextHandler(&log, nil)))
	want := []target{startTLS("dc1.corp.example.com", 389), startTLS("corp.example.com", 389), startTLS("dc9.dcs.example.net", 389)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("discoverTargets = %+v, %v; want %+v", got, err, want)
	}
	if !strings.Contains(log.String(), "skipped=5") || !strings.Contains(log.String(), "dc.evil.example") {
		t.Errorf("log does not report the 5 targets outside:\n%s", log.String())
	}
	// Without the suffix, its DC is outside too.
	got, err = discoverTargets(context.Background(), r, "corp.example.com", "", nil, nil)
	if err != nil || len(got) != 2 {
		t.Errorf("without suffixes: %+v, %v", got, err)
	}
}

// TestDiscoverTargetsOnlyOutside: records that all name hosts outside the domain
// fail discovery as no records do, from the site's answer too, with one bounded
// log line and a bounded error, whatever the names.
func TestDiscoverTargetsOnlyOutside(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".example."
	r := &fakeResolver{answers: map[string][]*net.SRV{
		siteName:   {srv(long, 389)},
		domainName: {srv("dc1.attacker.example.", 389), srv("dc2.attacker.example.", 636)},
	}}
	var log strings.Builder
	_, err := discoverTargets(context.Background(), r, "corp.example.com", "hq", nil, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(err.Error(), "DNS lists none usable (3 records name a host outside corp.example.com") {
		t.Fatalf("err = %v", err)
	}
	if len(err.Error()) > 400 || strings.Contains(err.Error(), long) {
		t.Errorf("error of %d bytes quotes the whole name: %v", len(err.Error()), err)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 || len(log.String()) > 400 || strings.Contains(log.String(), long) {
		t.Errorf("log of %d lines, %d bytes:\n%s", n, len(log.String()), log.String())
	}
}

// FuzzDiscoverTargetsWithinDomain: whatever targets an SRV answer names, every DC
// discovered is the domain or a suffix, or lies below one, judged label by label;
// the error and the log stay bounded.
func FuzzDiscoverTargetsWithinDomain(f *testing.F) {
	for _, s := range []string{
		"dc1.corp.example.com. evil.example.", "xcorp.example.com. corp.example.com.evil.", "CORP.EXAMPLE.COM", ". dc.dcs.example.net.",
		strings.Repeat("a", 63) + ".example.", "dc1.corp.example.com.. dc\x00.corp.example.com",
	} {
		f.Add(s, "dcs.example.net")
	}
	f.Fuzz(func(t *testing.T, targets, suffix string) {
		var records []*net.SRV
		for _, s := range strings.Fields(targets) {
			records = append(records, srv(s, 389))
		}
		r := &fakeResolver{answers: map[string][]*net.SRV{domainName: records}}
		var log strings.Builder
		got, err := discoverTargets(context.Background(), r, "corp.example.com", "", []string{suffix}, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil && len(err.Error()) > 1000 || log.Len() > 1000 {
			t.Fatalf("error of %d bytes, log of %d", len(fmt.Sprint(err)), log.Len())
		}
		below := func(host, suffix string) bool {
			h := strings.Split(host, ".")
			s := strings.Split(strings.ToLower(strings.TrimSuffix(suffix, ".")), ".")
			return len(s) <= len(h) && suffix != "" && slices.Equal(h[len(h)-len(s):], s)
		}
		for _, tg := range got {
			if !below(tg.serverName, "corp.example.com") && !below(tg.serverName, suffix) {
				t.Fatalf("discovered %q, outside corp.example.com and %q", tg.serverName, suffix)
			}
		}
	})
}
