package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/decisionlog"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/upstream/memory"
)

// The large-listing runs (-members): for each size, a generated AD export of that
// many users in one group (load.GeneratedExport) served by dirgate's memory
// upstream, the in-process cache and an allow-all policy, no domain controller and
// no Redis, one caller listing the group; against the bare server writing the bytes
// dirgate wrote, in each content coding. What it adds to a run's CPU per request is
// the memory dirgate holds, and its first listing's cost.

// allowAll is the run's policy: every caller views everything, so that the listing
// is the whole group and its cost is dirgate's, not the policy's.
const allowAll = "package dirgate.authz\n\nallow if true\n"

// sizeResult is one size's figures.
type sizeResult struct {
	Members   int   `json:"members"`
	LDIFBytes int64 `json:"ldifBytes"`
	// Loaded is dirgate's memory once it serves (the export loaded), before any listing.
	Loaded load.Memory `json:"loaded"`
	// First is the first listing (a cache miss, identity coding).
	First firstListing `json:"firstListing"`
	// Bodies are the bytes of the answer in each coding ("identity" for none).
	Bodies map[string]int `json:"bodyBytes"`
	// Served is dirgate's memory after every run of this size (Peak: the most from the
	// first listing on; Loaded.Peak is the load's).
	Served load.Memory `json:"served"`
	// BareServed is the bare server's, for the same bodies of one coding (the last).
	BareServed load.Memory `json:"bareServed"`
}

type firstListing struct {
	Wall          time.Duration `json:"wallNs"`
	CPU           time.Duration `json:"cpuNs"`
	CPUPerMemberU float64       `json:"cpuPerMemberUs"`
}

// runLarge measures each of o.members in turn, a dirgate of its own per size.
func runLarge(ctx context.Context, o options, stdout io.Writer) error {
	work, policyDir, done, err := workDir("dirgate-bench-large-", o.keep, stdout)
	if err != nil {
		return err
	}
	defer done()
	if err := os.WriteFile(filepath.Join(policyDir, "authz.rego"), []byte(allowAll), 0o600); err != nil {
		return err
	}
	env := machine()
	env.Cache = "in process (the large runs use no Redis)"
	env.print(stdout)
	o.redis = "off"

	var sizes []sizeResult
	var reports []*load.Report
	var wls []load.Workload
	var failed error
	for _, n := range o.members {
		res, reps, ws, err := runSize(ctx, &o, work, policyDir, n, stdout)
		if err != nil {
			// The sizes measured so far are still written.
			failed = fmt.Errorf("%d members: %w", n, err)
			break
		}
		sizes = append(sizes, res)
		reports = append(reports, reps...)
		wls = append(wls, ws...)
	}
	sums, err := writeMedians(stdout, o, reports)
	if err != nil {
		return err
	}
	paired := pairs(reports, wls)
	fmt.Fprintln(stdout, "\nmembers  coding    dirgate µs/req  bare µs/req  paired dirgate/bare  dirgate ns/member  first listing µs/member  RSS loaded  RSS served (peak)  body KB")
	for _, s := range sizes {
		for _, enc := range o.encodings {
			name := largeWorkload(s.Members, enc)
			dg, _ := load.Find(sums, name, "dirgate")
			b, _ := load.Find(sums, name, "bare")
			p, _ := findPairing(paired, name, "dirgate", "bare")
			fmt.Fprintf(stdout, "%7d  %-8s  %14.0f  %11.0f  %19s  %17.1f  %23.1f  %7d MB  %7d MB (%d)  %d\n",
				s.Members, enc, dg.ServerCPU, b.ServerCPU, p.Ratio, 1000*dg.ServerCPU/float64(s.Members),
				s.First.CPUPerMemberU, s.Loaded.RSS>>20, s.Served.RSS>>20, s.Served.Peak>>20, s.Bodies[enc]>>10)
		}
	}
	if o.jsonFile != "" {
		b, err := json.MarshalIndent(map[string]any{"machine": env, "options": o.public(), "sizes": sizes,
			"reports": reports, "summary": sums, "paired": paired}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonFile, b, 0o644); err != nil {
			return err
		}
	}
	if failed != nil {
		return failed
	}
	for _, s := range sums {
		if s.Wrong > 0 || s.Errors > 0 {
			return fmt.Errorf("%s against %s: %d wrong answers, %d errors", s.Workload, s.Target, s.Wrong, s.Errors)
		}
	}
	return nil
}

// largeWorkload names the listing of n members in coding enc.
func largeWorkload(n int, enc string) string { return "list" + strconv.Itoa(n) + "-" + enc }

// runSize generates the export of n members, starts dirgate on it, measures its
// memory and first listing, then runs the listing against dirgate and the bare
// server in every coding, -repeat times, interleaved.
func runSize(ctx context.Context, o *options, work, policyDir string, n int, stdout io.Writer) (sizeResult, []*load.Report, []load.Workload, error) {
	res := sizeResult{Members: n, Bodies: map[string]int{}}
	dir := filepath.Join(work, strconv.Itoa(n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, nil, nil, err
	}
	ldif := filepath.Join(dir, "export.ldif")
	export := load.GeneratedExport(n)
	res.LDIFBytes = int64(len(export))
	if err := os.WriteFile(ldif, export, 0o600); err != nil {
		return res, nil, nil, err
	}
	callers := []load.Caller{{Name: "admin", Subject: fixture.DemoAdminDN}}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := writeTokens(tokens, callers); err != nil {
		return res, nil, nil, err
	}
	w := load.Workload{Callers: callers, Ops: []load.Op{{Name: fmt.Sprintf("Generated Staff (%d members)", n),
		Kind: load.OpList, Query: load.Query{Group: load.GeneratedGroupDN}, Weight: 1}}}
	checker, err := expectMemory(ctx, export, policyDir, w)
	if err != nil {
		return res, nil, nil, err
	}
	export = nil
	runtime.GC() // the reference's directory is garbage now: it must not weigh on the runs

	// Loading takes about 0.1 s per thousand members on a busy machine: ten times that
	// before giving up.
	o.startTimeout = time.Duration(n) * time.Millisecond
	settings := map[string]string{"DIRGATE_UPSTREAM": "memory", "DIRGATE_MEMORY_LDIF": ldif}
	for k, v := range o.dirgateEnv {
		settings[k] = v
	}
	dg, err := startDirgate(ctx, filepath.Join(dir, "dirgate"), o.bin, settings, *o, load.LDAPConfig{}, policyDir, tokens)
	if err != nil {
		return res, nil, nil, err
	}
	defer dg.stop()
	if o.bin == "" {
		o.bin = dg.bin // built once, for every size
	}
	pid := dg.cmd.Process.Pid
	if res.Loaded, err = load.ReadMemory(pid); err != nil {
		return res, nil, nil, err
	}
	// Served.Peak is what serving took the process to, not the load's own peak.
	if err := load.ResetPeak(pid); err != nil {
		return res, nil, nil, err
	}

	// The first listing: a miss, read from the memory upstream and filled.
	before, err := load.ProcessCPUTime(pid)
	if err != nil {
		return res, nil, nil, err
	}
	start := time.Now()
	plain := load.NewHTTPTarget("dirgate", dg.url, w, checker)
	if _, err := plain.Capture(ctx, w); err != nil {
		return res, nil, nil, err
	}
	res.First.Wall = time.Since(start)
	after, err := load.ProcessCPUTime(pid)
	if err != nil {
		return res, nil, nil, err
	}
	res.First.CPU = after - before
	res.First.CPUPerMemberU = float64(res.First.CPU.Microseconds()) / float64(n)
	fmt.Fprintf(stdout, "%d members: export %d MB, dirgate pid %d holds %d MB loaded (%d MB at the load's peak); first listing %s wall, %s CPU (%.1f µs a member)\n",
		n, res.LDIFBytes>>20, pid, res.Loaded.RSS>>20, res.Loaded.Peak>>20, res.First.Wall.Round(time.Millisecond), res.First.CPU, res.First.CPUPerMemberU)

	client := load.Process{Name: load.ClientProcess}
	targets := map[string]map[string]load.Target{} // coding -> target name -> target
	procs := map[string]map[string][]load.Process{}
	var wls []load.Workload
	var bares []*bareProc
	defer func() {
		for _, b := range bares {
			b.stop()
		}
	}()
	for _, enc := range o.encodings {
		ew := w
		ew.Name = largeWorkload(n, enc)
		wls = append(wls, ew)
		dgT := load.NewHTTPTarget("dirgate", dg.url, ew, checker)
		if enc != "identity" {
			dgT.AcceptEncoding = enc
		}
		bodies, err := dgT.Capture(ctx, ew) // also makes the coded body dirgate keeps
		if err != nil {
			return res, nil, nil, err
		}
		for _, c := range bodies {
			res.Bodies[enc] = len(c.Body)
		}
		bare, err := startBare(dir, bodies)
		if err != nil {
			return res, nil, nil, err
		}
		bares = append(bares, bare)
		bareT := load.NewHTTPTarget("bare", bare.url, ew, checker)
		bareT.AcceptEncoding = dgT.AcceptEncoding
		targets[enc] = map[string]load.Target{"dirgate": dgT, "bare": bareT}
		procs[enc] = map[string][]load.Process{"dirgate": {{Name: "dirgate", PID: pid}, client},
			"bare": {{Name: "bare", PID: bare.cmd.Process.Pid}, client}}
	}

	var reports []*load.Report
	for rep := range o.repeat {
		for i, enc := range o.encodings {
			for _, name := range rotate([]string{"dirgate", "bare"}, rep) {
				opts := load.Options{Concurrency: o.concurrency, Duration: o.duration, Requests: o.requests,
					Warmup: o.warmup, Seed: uint64(rep), Processes: procs[enc][name]}
				r, err := runOne(ctx, stdout, targets[enc][name], wls[i], opts, rep)
				if err != nil {
					return res, nil, nil, err
				}
				reports = append(reports, r)
			}
		}
	}
	if res.Served, err = load.ReadMemory(pid); err != nil {
		return res, nil, nil, err
	}
	if len(bares) > 0 {
		if res.BareServed, err = load.ReadMemory(bares[len(bares)-1].cmd.Process.Pid); err != nil {
			return res, nil, nil, err
		}
	}
	return res, reports, wls, nil
}

// expectMemory computes the expected listings from export with the memory upstream
// and the run's policy, in this process: a directory of its own, uncached.
func expectMemory(ctx context.Context, export []byte, policyDir string, w load.Workload) (*load.Checker, error) {
	d, err := memory.Load("reference", export)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	authz, err := policy.Open(ctx, policy.Config{Dir: policyDir, Logger: quiet, DecisionLog: discardedLines()})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer authz.Close()
	return load.Expect(ctx, &dirgate.MemberService{Dir: d, Authz: authz}, w)
}

// parseMembers reads -members: sizes separated by commas, "k" for thousands.
func parseMembers(spec string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		mult := 1
		if t, ok := strings.CutSuffix(s, "k"); ok {
			s, mult = t, 1000
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-members: %q is not a positive count", s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// discardedLines is a decision log encoding every line, as dirgate does, to
// io.Discard.
func discardedLines() policy.DecisionLog {
	dlog, err := decisionlog.New(decisionlog.Config{Writer: io.Discard})
	if err != nil {
		panic(err) // a Config without masks is always valid
	}
	return dlog
}
