package opaconfig

import (
	"strings"
	"testing"
)

// TestParseFile: the keys dirgate refuses are start-up errors, the ones it does
// not act on are named, and a file without bundles is refused.
func TestParseFile(t *testing.T) {
	f, err := parseFile([]byte(`
services: {s: {url: "http://127.0.0.1:1"}}
bundles: {authz: {service: s, resource: b.tar.gz}}
server: {encoding: {gzip: {min_length: 1}}}
caching: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.ignored, ",") != "caching,server" || strings.Join(f.bundles, ",") != "authz" {
		t.Errorf("ignored %v, bundles %v", f.ignored, f.bundles)
	}
	for _, c := range []struct{ file, want string }{
		{`services: {s: {url: "http://x"}}`, `names no bundle`},
		{`{bundles: {a: {service: s}}, discovery: {name: d}}`, `discovery`},
		{`{bundles: {a: {service: s}}, bundle: {name: d}}`, `deprecated`},
		{`{bundles: {a: {service: s, trigger: manual}}}`, `manual`},
		{`{bundles: {a: {service: s}}, decision_logs: {plugin: p}}`, `decision_logs.plugin`},
		{`{bundles: {a: {service: s}}, decision_logs: {reporting: {trigger: manual}}}`, `manual`},
		{`[1, 2]`, `opa config`},
		{``, `empty`},
	} {
		if _, err := parseFile([]byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.file, err, c.want)
		}
	}
}

// FuzzParseFile: the configuration file is read by people's tools and typos;
// whatever it holds, parsing returns.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(`{bundles: {a: {service: s}}}`))
	f.Add([]byte("services:\n  s: {url: x}\nbundles: {a: {service: s, trigger: manual}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parseFile(b)
		if err == nil && len(file.bundles) == 0 {
			t.Fatal("a file without bundles parsed")
		}
		if file != nil {
			warnings, terr := file.checkTrust(Trust{Unsigned: true, PlainHTTP: true})
			if terr != nil {
				t.Fatalf("with every choice accepted, checkTrust = %v", terr)
			}
			if _, terr := file.checkTrust(Trust{}); (terr == nil) != (len(warnings) == 0) {
				t.Fatalf("%d warnings when accepted, but refused: %v", len(warnings), terr)
			}
		}
	})
}

// TestCheckTrust: the services of either of OPA's forms (a map, a list of named
// services) are checked, an https URL and a signed bundle pass, and a service
// with OPA credentials from a plugin is refused.
func TestCheckTrust(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{services: [{name: a, url: "http://x"}], bundles: {b: {service: a, signing: {keyid: k}}}}`, "service a is plain HTTP"},
		{`{services: [{name: a, url: "HTTP://x"}], bundles: {b: {service: a, signing: {keyid: k}}}}`, "service a is plain HTTP"},
		{`{services: {a: {url: "https://x"}}, bundles: {b: {service: a, signing: {}}}}`, ""},
		{`{services: {a: {url: "https://x"}}, bundles: {b: {service: a}}}`, "bundle b has no signing block"},
	} {
		f, err := parseFile([]byte(c.file))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.checkTrust(Trust{})
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: checkTrust = %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := parseFile([]byte(`{services: {a: {url: "https://x", credentials: {plugin: p}}}, bundles: {b: {service: a}}}`)); err == nil || !strings.Contains(err.Error(), "credentials.plugin") {
		t.Errorf("credentials.plugin: %v", err)
	}
}
