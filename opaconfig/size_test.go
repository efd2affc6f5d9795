package opaconfig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// paddedBundle is opabundle.Signed with s's key, under the key id bundleConfig
// names.
func paddedBundle(t *testing.T, s signer, files map[string]string, pads int, padBytes int64) []byte {
	t.Helper()
	return opabundle.Signed(t, s.priv, "ci", files, pads, padBytes)
}

// bombEnv names the configuration file a child process opens (TestBundleBombChild).
const bombEnv = "DIRGATE_TEST_BUNDLE_BOMB_CONFIG"

// bombResult is what the child reports: Open's error, and its peak resident
// memory while Open ran.
type bombResult struct {
	Err       string `json:"err"`
	PeakBytes int64  `json:"peakBytes"`
	BaseBytes int64  `json:"baseBytes"`
}

// openInChild opens cfgFile in a child process (this test binary, running
// TestBundleBombChild), so that the peak memory measured is that of Open alone.
//
// Open waits 15 s for the bundle: a layer of 100 MB takes seconds to pull and
// refuse under the race detector on a loaded machine, and the refusal must be the
// error Open reports.
func openInChild(t *testing.T, cfgFile string) bombResult {
	return openInChildWaiting(t, cfgFile, 15*time.Second, 0)
}

// bombWaitEnv is the child's Config.StartWait, in seconds.
const bombWaitEnv = "DIRGATE_TEST_BUNDLE_BOMB_WAIT"

// bombMaxEnv is the child's Config.MaxBundleBytes.
const bombMaxEnv = "DIRGATE_TEST_BUNDLE_BOMB_MAX"

// openInChildWaiting is openInChild with Open waiting up to wait for the bundle,
// under a bound of maxBytes (0: the default).
func openInChildWaiting(t *testing.T, cfgFile string, wait time.Duration, maxBytes int64) bombResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBundleBombChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), bombEnv+"="+cfgFile, fmt.Sprintf("%s=%d", bombWaitEnv, wait/time.Second), fmt.Sprintf("%s=%d", bombMaxEnv, maxBytes))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "BOMB "); ok {
			var r bombResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("child reported nothing:\n%s", out)
	return bombResult{}
}

// TestBundleBombChild is the child of openInChild; it is skipped otherwise.
func TestBundleBombChild(t *testing.T) {
	cfgFile := os.Getenv(bombEnv)
	if cfgFile == "" {
		t.Skip("run by openInChild")
	}
	wait, err := strconv.Atoi(os.Getenv(bombWaitEnv))
	if err != nil {
		t.Fatal(err)
	}
	maxBytes, err := strconv.ParseInt(os.Getenv(bombMaxEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	base := memory(t, "VmRSS")
	// The peak from here on (Linux: clear_refs 5 resets VmHWM to VmRSS).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt, err := opaconfig.Open(ctx, opaconfig.Config{File: cfgFile, Logger: quietLogger(), StartWait: time.Duration(wait) * time.Second, MaxBundleBytes: maxBytes})
	if err == nil {
		// A bundle that comes into force is compiled by the Authorizer as well,
		// as cmd/dirgate wires them: the peak is that of a serving instance.
		var a *policy.Authorizer
		a, err = policy.Open(ctx, policy.Config{Files: rt.Files(), Source: rt.Source(), Logger: quietLogger(), DecisionLog: sinkLog(t, rt.DecisionSink())})
		if err == nil {
			_, err = a.Decide(ctx, removal)
			a.Close()
		}
		rt.Close(ctx)
	}
	r := bombResult{PeakBytes: memory(t, "VmHWM"), BaseBytes: base}
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("BOMB %s\n", b)
}

// memory reads one of /proc/self/status's sizes (VmRSS, VmHWM), in bytes.
func memory(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// TestBundleSizeBound: a signed bundle whose files hold hundreds of megabytes of
// zeros (a few hundred kilobytes compressed) is refused while it is read, in one
// file of 400 MB (over OPA's size_limit_bytes, which dirgate sets to its bound)
// or in a thousand files of 100 KB each under it (100 MB, over the total), and
// the peak memory of the instance stays far
// below what the bundle would take; dirgate does not start without a policy. The
// same bundle with small pads, signed alike, comes into force: the refusals are
// the size's, not the signature's.
func TestBundleSizeBound(t *testing.T) {
	s := newSigner(t)
	srv := newBundleServer(t)
	files := policyFiles("yes")
	files[".manifest"] = `{"revision": "padded"}`

	small := paddedBundle(t, s, files, 2, 1000)
	srv.put("/bundles/authz.tar.gz", small)
	g := openGateway(t, opaconfig.Config{File: writeConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir()))}, policy.Config{}, candidate.Config{})
	if !allows(t, g.a) {
		t.Fatal("the small padded bundle is not in force")
	}
	g.close()

	for _, c := range []struct {
		name  string
		pads  int
		total int64
		want  string
	}{
		{"one file", 1, 400 << 20, "size_limit_bytes"},
		{"a thousand files", 1000, 100_000_000, "DIRGATE_OPA_BUNDLE_MAX_BYTES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			total := c.total
			b := paddedBundle(t, s, files, c.pads, total/int64(c.pads))
			srv.put("/bundles/authz.tar.gz", b)
			r := openInChild(t, writeConfig(t, bundleConfig(t, srv.URL, &s, t.TempDir())))
			t.Logf("%d bytes compressed, %d MB decompressed: peak RSS %.1f MB (%.1f MB before Open); %s",
				len(b), total>>20, float64(r.PeakBytes)/(1<<20), float64(r.BaseBytes)/(1<<20), r.Err)
			if !strings.Contains(r.Err, c.want) {
				t.Errorf("Open = %q, want it refused over %s", r.Err, c.want)
			}
			// OPA retries every second and each attempt leaves garbage, and the
			// race detector doubles what is resident: 60 MB is still far below
			// what the bundle takes without the bound.
			if r.PeakBytes-r.BaseBytes > 60<<20 {
				t.Errorf("peak RSS %d MB over the %d MB before Open, want it far below the bundle's %d MB",
					(r.PeakBytes-r.BaseBytes)>>20, r.BaseBytes>>20, total>>20)
			}
		})
	}
}

// sinkLog is a decision log sending its decisions to sink (nil: none).
func sinkLog(t testing.TB, sink dirgate.DecisionSink) policy.DecisionLog {
	if sink == nil {
		return nil
	}
	dlog, err := decisionlog.New(decisionlog.Config{Sink: sink, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return dlog
}
