package opaconfig_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// denseKinds are bundle files that are small on the wire and in the tar but
// large once parsed: n bytes of each become Go values (and OPA terms), or Rego
// rules, many times their size. Each returns the files to add to policyFiles.
var denseKinds = []struct {
	name  string
	files func(n int) map[string]string
	// unsignable: OPA's signature hasher refuses the file (JSON nested deeper
	// than its parser's 10,000 levels), so no signed bundle holds it.
	unsignable bool
}{
	{"data.json array of zeros", func(n int) map[string]string {
		return map[string]string{"data.json": `{"answer": "yes", "dense": [0` + strings.Repeat(",0", (n-32)/2) + `]}`}
	}, false},
	{"data.json small objects", func(n int) map[string]string {
		return map[string]string{"data.json": `{"answer": "yes", "dense": [{"a":0}` + strings.Repeat(`,{"a":0}`, (n-40)/8) + `]}`}
	}, false},
	// Not JSON: OPA reads a data.json that is not JSON as YAML when it hashes
	// it for the signature check.
	{"data.json YAML list", func(n int) map[string]string {
		return map[string]string{"data.json": "answer: \"yes\"\ndense:\n" + strings.Repeat("- 0\n", (n-32)/4)}
	}, false},
	{"data.json nested arrays", func(n int) map[string]string {
		return map[string]string{"data.json": `{"answer": "yes", "dense": ` + strings.Repeat("[", (n-32)/2) + strings.Repeat("]", (n-32)/2) + `}`}
	}, true},
	{"rego small rules", func(n int) map[string]string {
		var b strings.Builder
		b.WriteString(policyFiles("yes")["dirgate/authz.rego"] + "\n")
		for i := 0; b.Len() < n-32; i++ {
			fmt.Fprintf(&b, "r%d := %d\n", i, i)
		}
		return map[string]string{"dirgate/authz.rego": b.String()}
	}, false},
}

// denseSizes are the sizes measured: the default bound less room for the tar's
// headers and the signatures, unless DIRGATE_TEST_DENSE_MIB lists others (in
// MiB, comma-separated: the table of docs/policy.md).
func denseSizes(t *testing.T) []int {
	v := os.Getenv("DIRGATE_TEST_DENSE_MIB")
	if v == "" {
		return []int{opaconfig.DefaultMaxBundleBytes - 16<<10}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		mib, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, int(mib*(1<<20))-16<<10)
	}
	return out
}

// denseBundleLimit is the peak resident memory a dense bundle at the default
// bound may add to an instance, signed or not: within the 256 MiB a replica's
// policy may take under the pod limit of deploy/kubernetes (512 Mi). Under the
// race detector what is resident grows by up to 2.5 times (Rego of small rules:
// 119 MiB without, 300 MiB with).
func denseBundleLimit() int64 {
	if raceDetector {
		return 3 * 160 << 20
	}
	return 160 << 20
}

// TestDenseBundleMemory: a bundle within the bound whose files are dense (JSON
// or YAML of tiny values, deep nesting, thousands of small rules) is parsed
// into far more memory than its size. Each kind is served signed (and comes
// into force: what the holder of the signing key can publish), with the
// signatures of another bundle (what the bundle server alone can send: OPA
// parses a data file to hash it before it finds the digest wrong) and unsigned
// (refused before any file is parsed). At the default bound the peak of the
// instance, which also compiles the policy, stays under denseBundleLimit.
func TestDenseBundleMemory(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	small := policyFiles("yes")
	small[".manifest"] = `{"revision": "small"}`
	replayed := opabundle.Signatures(t, s.priv, "ci", small)

	for _, n := range denseSizes(t) {
		for _, k := range denseKinds {
			// The same manifest as the small bundle's: its digest matches, and
			// data.json is the first file whose digest OPA checks.
			dense := policyFiles("yes")
			dense[".manifest"] = small[".manifest"]
			for p, c := range k.files(n) {
				dense[p] = c
			}
			for _, mode := range []string{"signed", "another bundle's signatures", "unsigned"} {
				name := fmt.Sprintf("%s/%.2f MiB/%s", k.name, float64(n)/(1<<20), mode)
				t.Run(name, func(t *testing.T) {
					if mode == "signed" && k.unsignable {
						t.Skip("OPA's signature hasher refuses it: no signed bundle holds it")
					}
					var b []byte
					switch mode {
					case "signed":
						b = opabundle.Signed(t, s.priv, "ci", dense, 0, 0)
					case "unsigned":
						b = opabundle.Tarball(t, dense)
					default:
						files := map[string]string{".signatures.json": replayed}
						for p, c := range dense {
							files[p] = c
						}
						b = opabundle.Tarball(t, files)
					}
					srv.put("/bundles/authz.tar.gz", b)
					wait := 5 * time.Second
					if mode == "signed" {
						wait = 120 * time.Second // it comes into force; parsing takes a while
					}
					// Sizes past the default bound are measured under a bound just above them.
					var bound int64
					if int64(n) >= opaconfig.DefaultMaxBundleBytes {
						bound = int64(n) + 1<<20
					}
					r := openInChildWaiting(t, writeConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir())), wait, bound)
					grown := r.PeakBytes - r.BaseBytes
					outcome := "in force"
					if r.Err != "" {
						outcome = "refused: " + r.Err
					}
					t.Logf("DENSE | %s | %s | %.2f MiB | peak %.0f MiB over %.0f MiB | %.1f MiB per MiB | %s",
						k.name, mode, float64(n)/(1<<20), float64(grown)/(1<<20), float64(r.BaseBytes)/(1<<20),
						float64(grown)/float64(n), outcome)
					if mode != "signed" && r.Err == "" {
						t.Errorf("a bundle (%s) came into force", mode)
					}
					if mode == "signed" && r.Err != "" {
						t.Errorf("the signed bundle was refused (its peak is not that of a policy in force): %s", r.Err)
					}
					if n < opaconfig.DefaultMaxBundleBytes && grown > denseBundleLimit() {
						t.Errorf("peak %d MiB over the start, want at most %d MiB for a bundle within the default bound",
							grown>>20, denseBundleLimit()>>20)
					}
				})
			}
		}
	}
}
