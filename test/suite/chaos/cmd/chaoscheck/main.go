// Command chaoscheck judges a chaos run's history (test/suite/chaos/history), prints
// the report as JSON on standard output, and draws the run's timeline:
//
//	go run ./test/suite/chaos/cmd/chaoscheck -initial initial.json -plot run.png history.jsonl
//
// initial.json holds each group's direct members when the run began, as
// {"<group dn>": ["<member dn>", …]}. The bounds are the promises the run is
// held to (docs/chaos.md, "What the checker checks"). It exits 1 when the
// history holds an anomaly, 2 when it cannot be read.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dirgate/dirgate/test/suite/chaos/history"
)

func main() {
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaoscheck:", err)
	}
	os.Exit(code)
}

func run(args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("chaoscheck", flag.ContinueOnError)
	var cfg history.Config
	initial := fs.String("initial", "", "JSON file of each group's direct members when the run began")
	plotPath := fs.String("plot", "", "write the run's timeline as a PNG to this file")
	fs.DurationVar(&cfg.Staleness, "staleness", 10*time.Second, "S: a listing reflects every direct change S of calm old")
	fs.DurationVar(&cfg.Converge, "converge", 10*time.Second, "how long two writes on different DCs may be ordered by replication, not real time")
	fs.DurationVar(&cfg.DisableBound, "disable-bound", 10*time.Second, "how soon a disabled account's tokens stop working, counted like staleness")
	fs.DurationVar(&cfg.Settle, "settle", 10*time.Second, "how long after a fault heals listings need not succeed yet")
	fs.DurationVar(&cfg.MaxRequest, "max-request", 0, "how long after its start a write with no answer may still take effect (0: at any time)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, errors.New("give one history file (JSON lines)")
	}
	if *initial != "" {
		b, err := os.ReadFile(*initial)
		if err != nil {
			return 2, err
		}
		if err := json.Unmarshal(b, &cfg.Initial); err != nil {
			return 2, fmt.Errorf("%s: %w", *initial, err)
		}
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return 2, err
	}
	ops, err := history.Read(f)
	f.Close()
	if err != nil {
		return 2, fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	r := history.Check(ops, cfg)
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return 2, err
	}
	if *plotPath != "" {
		if err := history.Plot(ops, r, *plotPath); err != nil {
			return 2, err
		}
	}
	if len(r.Anomalies) > 0 {
		return 1, nil
	}
	return 0, nil
}
