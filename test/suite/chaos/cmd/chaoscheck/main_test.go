package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/suite/chaos/history"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	no := false
	ops := []history.Op{
		{ID: 1, Kind: history.Remove, Replica: "A", Group: "cn=g", Member: "cn=u", Start: ms(0), End: ms(100), Status: 200, NoChanges: &no},
		{ID: 2, Kind: history.List, Replica: "B", Group: "cn=g", Start: ms(200), End: ms(300), Status: 200, Members: []string{"cn=u"}},
	}
	var hist bytes.Buffer
	if err := history.Write(&hist, ops); err != nil {
		t.Fatal(err)
	}
	histPath, initPath, png := filepath.Join(dir, "h.jsonl"), filepath.Join(dir, "init.json"), filepath.Join(dir, "run.png")
	if err := os.WriteFile(histPath, hist.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(initPath, []byte(`{"cn=g":["cn=u"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := run([]string{"-initial", initPath, "-plot", png, histPath}, &out)
	if err != nil || code != 1 {
		t.Fatalf("code %d, err %v", code, err)
	}
	var r history.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != history.LostWrite || r.Anomalies[0].Op != 2 {
		t.Errorf("report %s", out.Bytes())
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
	if code, err := run([]string{filepath.Join(dir, "missing")}, &out); code != 2 || err == nil {
		t.Errorf("missing file: code %d, err %v", code, err)
	}
}
