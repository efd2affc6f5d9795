package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/tools/load"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		// Driving a running dirgate needs the callers' tokens.
		{"url without tokens", []string{"-url", "http://127.0.0.1:1/x"}, "-url needs -tokens"},
		// A run must stop by itself.
		{"unbounded", []string{"-duration", "0"}, "must bound"},
		{"no clients", []string{"-concurrency", "0"}, "must be positive"},
		// The A/B's second dirgate.
		{"b settings", []string{"-b-env", "DIRGATE_DECISION_LOG=off"}, ""},
		{"b setting not dirgate's", []string{"-b-env", "GOGC=400"}, "is not DIRGATE_NAME=value"},
		{"b target without b", []string{"-targets", "dirgate,dirgate-b"}, "needs -b-bin or -b-env"},
		{"b with a running dirgate", []string{"-url", "http://127.0.0.1:1/x", "-tokens", "a=b", "-b-bin", "/x"}, "not -url"},
		{"b on the first's port", []string{"-dirgate-env", "DIRGATE_LISTEN=127.0.0.1:8099", "-b-bin", "/x"}, "DIRGATE_LISTEN of its own"},
		// Large listings on the memory upstream.
		{"members", []string{"-members", "1k,10000,250k", "-encodings", "identity,zstd"}, ""},
		{"members not a count", []string{"-members", "1k,x"}, `"x" is not a positive count`},
		{"members zero", []string{"-members", "0"}, "is not a positive count"},
		{"members coding", []string{"-members", "1k", "-encodings", "br"}, `"br" is not identity, gzip or zstd`},
		{"members with a running dirgate", []string{"-members", "1k", "-url", "http://127.0.0.1:1/x", "-tokens", "a=b"}, "starts its own dirgate"},
		// The cross-domain comparison on the forest.
		{"forest", []string{"-forest", "2,200"}, ""},
		{"forest size", []string{"-forest", "2,1"}, `"1" is not a group size`},
		{"forest not a size", []string{"-forest", "2,x"}, `"x" is not a group size`},
		{"forest with a running dirgate", []string{"-forest", "2", "-url", "http://127.0.0.1:1/x", "-tokens", "a=b"}, "starts its own dirgate"},
		{"forest with large listings", []string{"-forest", "2", "-members", "1k"}, "starts its own dirgate"},
		{"forest with b", []string{"-forest", "2", "-b-env", "DIRGATE_DECISION_LOG=off"}, "not with -b-bin or -b-env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("parse(%q) = %v, want %q", tt.args, err, tt.wantErr)
			}
			if err == nil && o.hasB() != slices.Contains(o.targets, targetB) {
				t.Errorf("parse(%q): targets %v with hasB %v", tt.args, o.targets, o.hasB())
			}
		})
	}
}

func TestParseMembers(t *testing.T) {
	o, err := parse([]string{"-members", "1k, 10000,250k", "-encodings", "gzip"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.members, []int{1000, 10000, 250000}) || !slices.Equal(o.encodings, []string{"gzip"}) {
		t.Errorf("members %v, encodings %v", o.members, o.encodings)
	}
	if o, _ := parse(nil); o.members != nil {
		t.Errorf("members %v without -members", o.members)
	}
}

func TestWorkloads(t *testing.T) {
	s, err := load.LargeSetup(fixture.Large())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		names   []string
		wantOps []int // operations per workload
		wantErr bool
	}{
		{"target listing, both callers", []string{"list1000"}, []int{2}, false},
		// One caller only.
		{"admin", []string{"list1000-admin"}, []int{1}, false},
		// mix is listings only (every target can serve it); mix-removals adds the
		// removal-group listings and the removal cycles.
		{"mixes", []string{"mix", "mix-removals"}, []int{36, 45}, false},
		{"unknown", []string{"list1001"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wls, err := workloads(s, tt.names)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			var ops []int
			for _, w := range wls {
				ops = append(ops, len(w.Ops))
			}
			if !slices.Equal(ops, tt.wantOps) {
				t.Errorf("ops %v, want %v", ops, tt.wantOps)
			}
		})
	}
}

// Targets take turns at going first, so that none is always measured on a machine
// warmed (or loaded) by the one before.
func TestRotate(t *testing.T) {
	in := []string{"a", "b", "c"}
	for n, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(in, n); !slices.Equal(got, want) {
			t.Errorf("rotate(%d) = %v, want %v", n, got, want)
		}
	}
}

// The tokens file holds hashes of fresh random tokens, and subjects that YAML reads
// back unchanged (DNs hold commas, backslashes and quotes).
func TestWriteTokens(t *testing.T) {
	callers := []load.Caller{{Name: "a", Subject: fixture.CommaNameDN}, {Name: "b", Subject: fixture.QuoteNameDN}}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := writeTokens(path, callers); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if callers[0].Token == "" || callers[0].Token == callers[1].Token || strings.Contains(string(b), callers[0].Token) {
		t.Errorf("tokens %q %q in file:\n%s", callers[0].Token, callers[1].Token, b)
	}
	if !strings.Contains(string(b), "subject: '"+fixture.CommaNameDN+"'") {
		t.Errorf("subject not single-quoted verbatim:\n%s", b)
	}
}

func TestSetTokens(t *testing.T) {
	callers := []load.Caller{{Name: "admin"}, {Name: "helpdesk"}}
	if err := setTokens(callers, "admin=x,helpdesk=y=z"); err != nil || callers[0].Token != "x" || callers[1].Token != "y=z" {
		t.Errorf("tokens %+v, %v", callers, err)
	}
	if err := setTokens(callers, "admin=x"); err == nil {
		t.Error("a caller without a token was accepted")
	}
}

func TestServingAddr(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	log := `{"level":"WARN","msg":"tokens file holds plain-text tokens"}
not json
{"level":"INFO","msg":"dirgate serving","version":"dev","addr":"127.0.0.1:40379"}
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servingAddr(path); got != "127.0.0.1:40379" {
		t.Errorf("servingAddr = %q", got)
	}
}

// TestFixedAddr: a DIRGATE_LISTEN with a port is used as given (a run at a log level
// that does not say where dirgate serves); port 0 is read from the log.
func TestFixedAddr(t *testing.T) {
	for listen, want := range map[string]string{"127.0.0.1:18471": "127.0.0.1:18471", "127.0.0.1:0": "", "": "", "nonsense": ""} {
		if got := fixedAddr(listen); got != want {
			t.Errorf("fixedAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}
