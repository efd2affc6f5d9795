package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The change feed's figures are drawn from a bulk run's JSON, and a file without a
// polled phase is refused rather than drawn empty.
func TestDrawChangeFeed(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bulk.json")
	os.WriteFile(good, []byte(`{"changes":3,"phases":[{"name":"bare"},{"name":"feed-polled","samples":[
		{"committedS":0.1,"latencyS":0.5},{"committedS":0.2,"latencyS":1.5},{"committedS":0.3,"latencyS":-1}]}]}`), 0o644)
	if err := drawChangeFeed(dir, []string{"run=" + good}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"changefeed-bulk.png", "changefeed-bulk-time.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s not drawn: %v", f, err)
		}
	}
	bare := filepath.Join(dir, "bare.json")
	os.WriteFile(bare, []byte(`{"changes":3,"phases":[{"name":"bare"}]}`), 0o644)
	if err := drawChangeFeed(dir, []string{"run=" + bare}); err == nil {
		t.Fatal("a file without samples was drawn")
	}
	if err := drawChangeFeed(dir, []string{good}); err == nil {
		t.Fatal("an argument without a label was accepted")
	}
}

// A change never seen ranks above every seen one.
func TestPctUnseen(t *testing.T) {
	v := []float64{0.5, -1, 1}
	if got := pct(v, 0.5); got != 1 {
		t.Fatalf("p50 %v, want 1", got)
	}
	if got := pct(v, 0.99); got < 1e300 {
		t.Fatalf("p99 %v, want +Inf", got)
	}
}
