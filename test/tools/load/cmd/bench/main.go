// Command bench measures dirgate against its two baselines in one run, on loopback:
//
//  1. creates the load groups on the harness domain controller (idempotent: LDAP as
//     the administrator, under OU=dirgate-load; the fixture is not touched);
//  2. starts redis-server on a free loopback port (when the dirgate binary has the
//     Redis settings) and dirgate itself as a subprocess: the LDAP upstream at the
//     DC, the bundled policy, a tokens file for three callers;
//  3. computes every expected listing with an uncached reference (the LDAP upstream
//     and the bundled policy, in this process, on their own connections);
//  4. issues every listing once through dirgate (checked; this warms its cache) and
//     starts the bare server with the captured bytes;
//  5. runs each workload against dirgate, the bare server and the DC directly,
//     interleaved, -repeat times, then the mixed workload with removals against
//     dirgate, and prints each run, the medians and the ratios.
//
// Usage (from the repository root, the DC's env file sourced):
//
//	set -a; . /tmp/dgs/env; set +a
//	go run ./test/tools/load/cmd/bench -concurrency 32 -duration 10s -repeat 5
//
// With -members, it measures large listings on the memory upstream instead (no DC,
// no Redis; large.go): a generated export of each size, dirgate against the bare
// server in each coding, dirgate's memory and first listing:
//
//	go run ./test/tools/load/cmd/bench -members 1k,10k,100k -concurrency 1 -duration 3s -json large.json
//
// With -forest, it compares cached listings of CORP groups whose members span CORP
// and FABRIKAM with CORP-only groups of the same sizes, on the two domains of
// test/harness/samba/forest.sh (forest.go; the forest's env file sourced):
//
//	go run ./test/tools/load/cmd/bench -forest 2,200,1000 -repeat 6 -duration 3s -warmup 1s
//
// docs/benchmarks.md has the figures and what they mean.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/upstream/ldap"
)

type options struct {
	bin         string
	url         string
	tokens      string
	targets     []string
	workloads   []string
	concurrency int
	duration    time.Duration
	requests    int64
	warmup      time.Duration
	repeat      int
	jsonFile    string
	redis       string
	keep        bool
	encoding    string
	writePolicy string
	dirgateEnv  map[string]string
	// A second dirgate ("dirgate-b"), for an A/B of two binaries or two settings in
	// one run: its own binary (default: the first's) and settings (after the first's).
	binB string
	envB map[string]string
	// members, when set, runs the large listings instead (large.go), in encodings.
	members   []int
	encodings []string
	// startTimeout, when set, bounds a dirgate's start instead of startTimeout.
	startTimeout time.Duration
	// dcLarge, when set, runs the first listings of large groups on a DC (dclarge.go).
	dcLarge string
	// forest, when set, runs the cross-domain comparison on the forest's two DCs at
	// these group sizes (forest.go).
	forest []int
}

// targetB names the second dirgate's runs.
const targetB = "dirgate-b"

func main() {
	if len(os.Args) == 3 && os.Args[1] == bareCommand {
		if err := serveBare(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "bench: bare server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.bin, "dirgate-bin", "", "dirgate binary to start (default: go build ./cmd/dirgate into the work directory)")
	fs.StringVar(&o.url, "url", "", "drive this running dirgate's resource URL instead of starting one (needs -tokens)")
	fs.StringVar(&o.tokens, "tokens", "", "with -url: the callers' tokens, admin=T1,helpdesk=T2,nobody=T3,half=T4")
	targets := fs.String("targets", "dirgate,bare,ldap", "targets to run, in the first repetition's order")
	workloads := fs.String("workloads", "list1000,mix,mix-removals", "workloads: list1000, list1000-admin, list1000-helpdesk, list1000-half, list2000-admin, list2000-half, mix (listings), mix-removals (dirgate only)")
	fs.StringVar(&o.encoding, "encoding", "", "Accept-Encoding of every request to dirgate and bare (gzip, zstd); empty asks for none")
	dgEnv := fs.String("dirgate-env", "", "settings for the dirgate this run starts, NAME=value,... (after the tool's own: DIRGATE_DECISION_LOG=off measures without the decision log)")
	fs.StringVar(&o.binB, "b-bin", "", "also start this dirgate binary as target dirgate-b, interleaved with the others (an A/B in one run)")
	envB := fs.String("b-env", "", "also start a dirgate-b with these settings, NAME=value,... (after -dirgate-env's)")
	fs.StringVar(&o.writePolicy, "write-policy", "", "write the run's policy (the bundled one plus the half caller's role) to this directory and exit: for -url")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent clients")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	fs.Int64Var(&o.requests, "requests", 0, "stop each run after this many operations (0: the duration alone)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each dirgate and bare run")
	fs.IntVar(&o.repeat, "repeat", 3, "runs of each workload and target, interleaved")
	fs.StringVar(&o.jsonFile, "json", "", "also write every report and the summary to this file as JSON")
	fs.StringVar(&o.redis, "redis", "auto", "auto: start a redis-server if dirgate has the Redis settings; off; or host:port of a running one")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (dirgate's logs)")
	members := fs.String("members", "", "instead of the DC's workloads: a large listing of each of these sizes (e.g. 1k,10k,100k) on the memory upstream, against the bare server, with dirgate's memory and first listing (no DC, no Redis)")
	fs.StringVar(&o.dcLarge, "dc-large", "", "instead of the DC's workloads: the first listing of each large group test/harness/samba/large.sh seeded (env: DIRGATE_LARGE_SIZES, or sizes such as 2k,20k) through dirgate against ldapsearch (dclarge.go)")
	forest := fs.String("forest", "", "instead of the DC's workloads: cached listings of CORP groups of these sizes (e.g. 2,200) whose members span CORP and FABRIKAM against CORP-only groups of the same size, through dirgate in front of test/harness/samba/forest.sh's two domains (forest.go)")
	encodings := fs.String("encodings", "identity,gzip,zstd", "with -members: the content codings to run (identity: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *members != "" {
		var err error
		if o.members, err = parseMembers(*members); err != nil {
			return o, err
		}
		o.encodings = strings.Split(*encodings, ",")
		for _, e := range o.encodings {
			if e != "identity" && e != "gzip" && e != "zstd" {
				return o, fmt.Errorf("-encodings: %q is not identity, gzip or zstd", e)
			}
		}
		if o.url != "" || o.hasB() {
			return o, errors.New("-members starts its own dirgate for each size: not with -url, -b-bin or -b-env")
		}
	}
	if *forest != "" {
		var err error
		if o.forest, err = parseSizes(*forest); err != nil {
			return o, err
		}
		if o.url != "" || o.members != nil || o.dcLarge != "" {
			return o, errors.New("-forest starts its own dirgate in front of the forest: not with -url, -members or -dc-large")
		}
	}
	o.targets, o.workloads = strings.Split(*targets, ","), strings.Split(*workloads, ",")
	var err error
	if o.dirgateEnv, err = parseEnv("-dirgate-env", *dgEnv); err != nil {
		return o, err
	}
	if o.envB, err = parseEnv("-b-env", *envB); err != nil {
		return o, err
	}
	if o.url != "" && o.tokens == "" {
		return o, errors.New("-url needs -tokens")
	}
	if o.hasB() {
		if o.forest != nil {
			return o, errors.New("-forest compares two listings on one dirgate: not with -b-bin or -b-env")
		}
		if o.url != "" {
			return o, errors.New("-b-bin and -b-env need a dirgate this run starts, not -url")
		}
		if l, ok := o.dirgateEnv["DIRGATE_LISTEN"]; ok && fixedAddr(l) != "" && o.envB["DIRGATE_LISTEN"] == "" {
			return o, errors.New("-dirgate-env gives DIRGATE_LISTEN a port: give -b-env a DIRGATE_LISTEN of its own")
		}
		if !slices.Contains(o.targets, targetB) {
			o.targets = append(o.targets, targetB)
		}
	} else if slices.Contains(o.targets, targetB) {
		return o, errors.New("target dirgate-b needs -b-bin or -b-env")
	}
	if o.concurrency <= 0 || o.repeat <= 0 || (o.duration <= 0 && o.requests <= 0) {
		return o, errors.New("concurrency and repeat must be positive, and a duration or a request count must bound each run")
	}
	return o, nil
}

// parseEnv reads NAME=value,... settings, each a DIRGATE_ one.
func parseEnv(flag, spec string) (map[string]string, error) {
	if spec == "" {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "DIRGATE_") {
			return nil, fmt.Errorf("%s: %q is not DIRGATE_NAME=value", flag, kv)
		}
		env[k] = v
	}
	return env, nil
}

func (o options) hasB() bool { return o.binB != "" || o.envB != nil }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.members != nil {
		return runLarge(ctx, o, stdout)
	}
	if o.dcLarge != "" {
		return runDCLarge(ctx, o, stdout)
	}
	if o.forest != nil {
		return runForest(ctx, o, stdout)
	}
	lc, err := load.LDAPConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	setup, err := load.LargeSetup(fixture.Large())
	if err != nil {
		return err
	}
	if o.writePolicy != "" {
		return setup.WritePolicy(o.writePolicy)
	}
	if err := createGroups(lc, setup); err != nil {
		return err
	}
	work, policyDir, done, err := workDir("dirgate-bench-", o.keep, stdout)
	if err != nil {
		return err
	}
	defer done()
	if err := setup.WritePolicy(policyDir); err != nil {
		return err
	}

	// Every expected answer, from the reference, before anything is removed.
	wls, err := workloads(setup, o.workloads)
	if err != nil {
		return err
	}
	all := load.Workload{Name: "all", Callers: setup.Callers, Removals: setup.Removals}
	for _, w := range wls {
		all.Ops = append(all.Ops, w.Ops...)
	}
	checker, err := expect(ctx, lc, policyDir, all)
	if err != nil {
		return err
	}

	env := machine()
	var dg, dgB *dirgateProc
	url := o.url
	if url == "" {
		tokens := filepath.Join(work, "tokens.yaml")
		if err := writeTokens(tokens, setup.Callers); err != nil {
			return err
		}
		dg, err = startDirgate(ctx, filepath.Join(work, "dirgate"), o.bin, o.dirgateEnv, o, lc, policyDir, tokens)
		if err != nil {
			return err
		}
		defer dg.stop()
		url, env.Cache = dg.url, dg.cache
		if o.hasB() {
			bin := o.binB
			if bin == "" {
				bin = dg.bin
			}
			settings := map[string]string{}
			maps.Copy(settings, o.dirgateEnv)
			maps.Copy(settings, o.envB)
			if dgB, err = startDirgate(ctx, filepath.Join(work, targetB), bin, settings, o, lc, policyDir, tokens); err != nil {
				return err
			}
			defer dgB.stop()
		}
	} else if err := setTokens(setup.Callers, o.tokens); err != nil {
		return err
	}
	for i := range wls {
		wls[i].Callers = setup.Callers
	}
	all.Callers = setup.Callers
	env.print(stdout)
	if dg != nil {
		fmt.Fprintf(stdout, "dirgate pid %d serving %s\n", dg.cmd.Process.Pid, url)
	}
	if dgB != nil {
		fmt.Fprintf(stdout, "dirgate-b pid %d serving %s (binary %s, settings %v after dirgate's)\n", dgB.cmd.Process.Pid, dgB.url, dgB.bin, o.envB)
	}
	fmt.Fprintln(stdout)

	dgTarget := load.NewHTTPTarget("dirgate", url, all, checker)
	dgTarget.AcceptEncoding = o.encoding
	bodies, err := dgTarget.Capture(ctx, all.Listings())
	if err != nil {
		return err
	}
	bare, err := startBare(work, bodies)
	if err != nil {
		return err
	}
	defer bare.stop()
	bareTarget := load.NewHTTPTarget("bare", bare.url, all, checker)
	bareTarget.AcceptEncoding = o.encoding
	targets := map[string]load.Target{
		"dirgate": dgTarget,
		"bare":    bareTarget,
		"ldap":    &load.LDAPTarget{Config: lc, Checker: checker},
	}
	if dgB != nil {
		bTarget := load.NewHTTPTarget(targetB, dgB.url, all, checker)
		bTarget.AcceptEncoding = o.encoding
		if _, err := bTarget.Capture(ctx, all.Listings()); err != nil { // warms its cache
			return err
		}
		targets[targetB] = bTarget
	}
	// The processes whose CPU each target's runs read: the server's own, and the
	// load generator's ("client") for comparison. The DC's is not read.
	client := load.Process{Name: load.ClientProcess}
	procs := map[string][]load.Process{
		"bare": {{Name: "bare", PID: bare.cmd.Process.Pid}, client},
		"ldap": {client},
	}
	if dg != nil {
		procs["dirgate"] = append(dg.processes("dirgate"), client)
	}
	if dgB != nil {
		procs[targetB] = append(dgB.processes(targetB), client)
	}

	var reports []*load.Report
	for rep := range o.repeat {
		for _, w := range wls {
			order := rotate(o.targets, rep)
			if w.Name == "mix-removals" {
				order = []string{"dirgate"}
			}
			for _, name := range order {
				t, ok := targets[name]
				if !ok {
					return fmt.Errorf("unknown target %q", name)
				}
				opts := load.Options{Concurrency: o.concurrency, Duration: o.duration, Requests: o.requests,
					Warmup: o.warmup, Seed: uint64(rep), Processes: procs[name]}
				if name == "ldap" {
					opts.Warmup = 0 // each client's connection is bound before timing starts
				}
				r, err := runOne(ctx, stdout, t, w, opts, rep)
				if err != nil {
					return err
				}
				reports = append(reports, r)
			}
		}
	}
	sums, err := writeMedians(stdout, o, reports)
	if err != nil {
		return err
	}
	paired := pairs(reports, wls)
	if err := verdict(stdout, sums, paired); err != nil {
		return err
	}
	if o.jsonFile != "" {
		b, err := json.MarshalIndent(map[string]any{"machine": env, "options": o.public(), "reports": reports, "summary": sums, "paired": paired}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonFile, b, 0o644); err != nil {
			return err
		}
	}
	for _, s := range sums {
		if s.Wrong > 0 || s.Errors > 0 {
			return fmt.Errorf("%s against %s: %d wrong answers, %d errors", s.Workload, s.Target, s.Wrong, s.Errors)
		}
	}
	return nil
}

// workloads returns the named workloads; mix-removals is the mix with its removal
// cycles and removal-group listings, the others are listings only.
func workloads(s load.Setup, names []string) ([]load.Workload, error) {
	var out []load.Workload
	for _, n := range names {
		switch n {
		case "list1000":
			out = append(out, s.ThousandWorkload())
		case "list1000-admin", "list1000-helpdesk":
			// One caller only: what the policy costs for a caller who sees everything
			// against one whose view is computed object by object.
			w := s.ThousandWorkload()
			w.Name = n
			w.Ops = slices.DeleteFunc(w.Ops, func(op load.Op) bool { return "list1000-"+w.Callers[op.Caller].Name != n })
			out = append(out, w)
		case "list1000-half":
			out = append(out, s.OneCaller(n, s.Thousand, load.CallerHalf))
		case "list2000-admin":
			out = append(out, s.OneCaller(n, s.Large, load.CallerAdmin))
		case "list2000-half":
			out = append(out, s.OneCaller(n, s.Large, load.CallerHalf))
		case "mix":
			w := s.MixWorkload().Listings()
			w.Name = "mix"
			out = append(out, w)
		case "mix-removals":
			w := s.MixWorkload()
			w.Name = "mix-removals"
			out = append(out, w)
		default:
			return nil, fmt.Errorf("unknown workload %q", n)
		}
	}
	return out, nil
}

func rotate(s []string, n int) []string {
	n %= len(s)
	return append(slices.Clone(s[n:]), s[:n]...)
}

func createGroups(lc load.LDAPConfig, s load.Setup) error {
	conn, err := lc.Dial(true)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := load.EnsureGroups(conn, load.LoadOU, s.Create); err != nil {
		return fmt.Errorf("load groups: %w", err)
	}
	return nil
}

// expect computes the expected answers with the LDAP upstream and the bundled
// policy, uncached, on connections of this process.
func expect(ctx context.Context, lc load.LDAPConfig, policyDir string, w load.Workload) (*load.Checker, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := ldap.Config{URL: lc.URL, BindDN: lc.BindDN, PasswordFile: lc.PasswordFile, BaseDN: lc.BaseDN, CAFile: lc.CAFile}.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer d.Close()
	authz, err := policy.Open(ctx, policy.Config{Dir: policyDir, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer authz.Close()
	return load.Expect(ctx, &dirgate.MemberService{Dir: d, Authz: authz}, w)
}

// pairing is one paired comparison of server CPU per request: Of's runs against
// Against's, repetition by repetition (load.Paired).
type pairing struct {
	Workload string      `json:"workload"`
	Of       string      `json:"of"`
	Against  string      `json:"against"`
	Ratio    load.Spread `json:"cpuRatio"`
}

// pairs are, for each workload, each dirgate against the bare server, and dirgate-b
// against dirgate: the A/B's own figure.
func pairs(reports []*load.Report, wls []load.Workload) []pairing {
	var out []pairing
	for _, w := range wls {
		for _, p := range [][2]string{{"dirgate", "bare"}, {targetB, "bare"}, {targetB, "dirgate"}} {
			if s := load.SpreadOf(load.Paired(reports, w.Name, p[0], p[1])); s.N > 0 {
				out = append(out, pairing{Workload: w.Name, Of: p[0], Against: p[1], Ratio: s})
			}
		}
	}
	return out
}

// verdict compares, for every workload run against a dirgate and the bare server, the
// medians with the project's performance targets, and says by how much a missed one is missed.
// The CPU target is judged on the median of the repetitions' paired ratios; the ratio
// of the two medians is printed beside it.
func verdict(w io.Writer, sums []load.Summary, paired []pairing) error {
	for _, dg := range sums {
		if dg.Target != "dirgate" && dg.Target != targetB {
			continue
		}
		b, ok := load.Find(sums, dg.Workload, "bare")
		if !ok || b.Throughput <= 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, %s against the bare server:\n", dg.Workload, dg.Target)
		r := dg.Throughput / b.Throughput
		fmt.Fprintf(w, "  throughput >= 60%% of bare: %.0f%% %s\n", 100*r, mark(r >= 0.6))
		if dg.ServerCPU > 0 && b.ServerCPU > 0 {
			c := dg.ServerCPU / b.ServerCPU
			// Both were read in the same repetitions, so they pair.
			p, _ := findPairing(paired, dg.Workload, dg.Target, "bare")
			fmt.Fprintf(w, "  server CPU per request <= 1.3x bare: paired %s %s; medians %.0f vs %.0f µs, %.2fx\n",
				p.Ratio, mark(p.Ratio.N > 0 && p.Ratio.Median <= 1.3), dg.ServerCPU, b.ServerCPU, c)
		}
		if b.P99 > 0 {
			p := float64(dg.P99) / float64(b.P99)
			fmt.Fprintf(w, "  p99 <= 1.5x bare: %s vs %s ms, %.2fx %s\n", dg.P99, b.P99, p, mark(p <= 1.5))
		}
	}
	for _, p := range paired {
		if p.Of == targetB && p.Against == "dirgate" {
			fmt.Fprintf(w, "\n%s, dirgate-b's server CPU per request against dirgate's: paired %s\n", p.Workload, p.Ratio)
		}
	}
	return nil
}

func findPairing(ps []pairing, workload, of, against string) (pairing, bool) {
	for _, p := range ps {
		if p.Workload == workload && p.Of == of && p.Against == against {
			return p, true
		}
	}
	return pairing{}, false
}

func mark(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(NOT met)"
}

func (o options) public() map[string]any {
	return map[string]any{"targets": o.targets, "workloads": o.workloads, "concurrency": o.concurrency,
		"duration": o.duration.String(), "requests": o.requests, "warmup": o.warmup.String(), "repeat": o.repeat, "redis": o.redis,
		"encoding": o.encoding, "dirgateEnv": o.dirgateEnv, "bBin": o.binB, "bEnv": o.envB,
		"members": o.members, "encodings": o.encodings, "forest": o.forest}
}

// workDir makes the run's work directory, with an empty policy directory in it; done
// removes it unless keep (then its path is printed).
func workDir(prefix string, keep bool, stdout io.Writer) (work, policyDir string, done func(), err error) {
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", nil, err
	}
	done = func() { os.RemoveAll(work) }
	if keep {
		fmt.Fprintln(stdout, "work directory:", work)
		done = func() {}
	}
	policyDir = filepath.Join(work, "policy")
	if err := os.Mkdir(policyDir, 0o700); err != nil {
		done()
		return "", "", nil, err
	}
	return work, policyDir, done, nil
}

// runOne runs w against t once, as repetition rep, and prints its row.
func runOne(ctx context.Context, stdout io.Writer, t load.Target, w load.Workload, opts load.Options, rep int) (*load.Report, error) {
	r, err := load.Run(ctx, t, w, opts)
	if err != nil {
		return nil, err
	}
	r.Repetition = rep
	return r, load.WriteTable(stdout, []*load.Report{r})
}

// writeMedians summarizes reports and prints the medians over the repetitions.
func writeMedians(stdout io.Writer, o options, reports []*load.Report) ([]load.Summary, error) {
	sums := load.Summarize(reports)
	fmt.Fprintf(stdout, "\nmedians of %d runs, %d clients, %s each:\n", o.repeat, o.concurrency, o.duration)
	return sums, load.WriteSummary(stdout, sums)
}
