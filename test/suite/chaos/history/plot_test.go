package history

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPlotWritesPNG(t *testing.T) {
	ops, cfg := simulate(3, 3000, 3*time.Second)
	// Faults on every kind of target, one never healed.
	extra := []Op{
		{Kind: Fault, Fault: "kill-redis-primary", Targets: []string{"redis-primary"}, Start: at(5000), End: at(9000)},
		{Kind: Fault, Fault: "kill-replica", Targets: []string{"replica:A"}, Start: at(20000), End: at(23000)},
		{Kind: Fault, Fault: "blackhole-dc", Targets: []string{"dc1", "dc2"}, Start: at(40000), End: at(44000)},
		{Kind: Fault, Fault: "stop-redis-replica", Targets: []string{"redis-replica"}, Start: at(50000)},
		{Kind: SignIn, Replica: "A", Token: "t1", Member: u1, Status: 200, Start: at(1000), End: at(1100)},
		{Kind: UseTok, Replica: "B", Token: "t1", Status: 200, Start: at(2000), End: at(2100)},
		{Kind: Revoke, Replica: "A", Token: "t1", Status: 200, Start: at(3000), End: at(3100)},
		{Kind: UseTok, Replica: "B", Token: "t1", Status: 401, Start: at(4000), End: at(4100)},
		{Kind: UseTok, Replica: "B", Token: "t1", Status: 200, Start: at(30000), End: at(30100)},
	}
	for _, o := range extra {
		o.ID = int64(len(ops) + 1)
		ops = append(ops, o)
	}
	r := Check(ops, cfg)
	if len(r.Anomalies) == 0 {
		t.Fatal("the lagging replica should give anomalies to draw")
	}
	path := filepath.Join(t.TempDir(), "run.png")
	if out := os.Getenv("CHAOS_PLOT_OUT"); out != "" {
		path = out // to look at it: CHAOS_PLOT_OUT=/tmp/run.png go test -run TestPlotWritesPNG ./test/suite/chaos/history/
	}
	if err := Plot(ops, r, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 10000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s: %d bytes, not a PNG of a run", path, len(b))
	}
	if err := Plot(nil, Report{}, path); err == nil {
		t.Error("plot of no operations: no error")
	}
}
