package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/upstream/domains"
	"github.com/dirgate/dirgate/upstream/ldap"
)

// runForest measures what a cached listing whose members come from two domains
// costs against one of the same size from one domain (docs/benchmarks.md, "Several
// domains"): on the two DCs of test/harness/samba/forest.sh it makes sure of a
// pair of CORP groups of each size (load.ForestPair), starts dirgate with CORP as
// the home domain and FABRIKAM in DIRGATE_LDAP_DOMAINS_FILE, fills its cache with
// every listing (checked against an uncached reference over the router), and runs
// each listing against dirgate and the bare server, interleaved, -repeat times.
// The figure is each pair's cross-domain listing against its one-domain listing on
// the same dirgate, paired per repetition.
func runForest(ctx context.Context, o options, stdout io.Writer) error {
	fc, err := load.ForestConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	setup, err := fc.ForestSetup(o.forest)
	if err != nil {
		return err
	}
	corp, err := fc.Corp.Dial(true)
	if err != nil {
		return err
	}
	defer corp.Close()
	fab, err := fc.Fabrikam.Dial(true)
	if err != nil {
		return err
	}
	defer fab.Close()
	if err := load.EnsureForest(corp, fab, fc, setup); err != nil {
		return fmt.Errorf("forest groups: %w", err)
	}
	work, policyDir, done, err := workDir("dirgate-bench-forest-", o.keep, stdout)
	if err != nil {
		return err
	}
	defer done()
	if err := bundled.WriteWithRoles(policyDir, setup.ForestRole()); err != nil {
		return err
	}
	domainsFile := filepath.Join(work, "domains.yaml")
	f := fc.Fabrikam
	yaml := "domains:\n  - base-dn: " + strconv.Quote(f.BaseDN) + "\n    url: " + strconv.Quote(f.URL) +
		"\n    bind-dn: " + strconv.Quote(f.BindDN) + "\n    password-file: " + strconv.Quote(f.PasswordFile) +
		"\n    ca-file: " + strconv.Quote(f.CAFile) + "\n"
	if err := os.WriteFile(domainsFile, []byte(yaml), 0o600); err != nil {
		return err
	}

	wls := setup.ForestWorkloads()
	all := load.Workload{Name: "all", Callers: setup.Callers}
	for _, w := range wls {
		all.Ops = append(all.Ops, w.Ops...)
	}
	checker, err := forestExpect(ctx, fc, policyDir, all)
	if err != nil {
		return err
	}

	env := machine()
	tokens := filepath.Join(work, "tokens.yaml")
	if err := writeTokens(tokens, setup.Callers); err != nil {
		return err
	}
	settings := map[string]string{"DIRGATE_LDAP_DOMAINS_FILE": domainsFile}
	for k, v := range o.dirgateEnv {
		settings[k] = v
	}
	dg, err := startDirgate(ctx, filepath.Join(work, "dirgate"), o.bin, settings, o, fc.Corp, policyDir, tokens)
	if err != nil {
		return err
	}
	defer dg.stop()
	env.Cache = dg.cache
	for i := range wls {
		wls[i].Callers = setup.Callers
	}
	all.Callers = setup.Callers
	env.print(stdout)
	fmt.Fprintf(stdout, "dirgate pid %d serving %s, CORP %s home, FABRIKAM %s in %s\n\n", dg.cmd.Process.Pid, dg.url, fc.Corp.URL, f.URL, domainsFile)

	dgTarget := load.NewHTTPTarget("dirgate", dg.url, all, checker)
	dgTarget.AcceptEncoding = o.encoding
	bodies, err := dgTarget.Capture(ctx, all.Listings())
	if err != nil {
		return err
	}
	if err := setup.CheckDomains(bodies, dirgate.MustParseDN(f.BaseDN).DomainName()); err != nil {
		return fmt.Errorf("the listings do not span the domains as the groups do: %w", err)
	}
	bare, err := startBare(work, bodies)
	if err != nil {
		return err
	}
	defer bare.stop()
	bareTarget := load.NewHTTPTarget("bare", bare.url, all, checker)
	bareTarget.AcceptEncoding = o.encoding
	client := load.Process{Name: load.ClientProcess}
	targets := map[string]load.Target{"dirgate": dgTarget, "bare": bareTarget}
	procs := map[string][]load.Process{
		"dirgate": append(dg.processes("dirgate"), client),
		"bare":    {{Name: "bare", PID: bare.cmd.Process.Pid}, client},
	}

	var reports []*load.Report
	for rep := range o.repeat {
		// The workloads come in pairs (cross, home): each pair's order, and the
		// targets', turn at every repetition.
		for i := 0; i < len(wls); i += 2 {
			for _, w := range rotateWorkloads(wls[i:i+2], rep) {
				for _, name := range rotate([]string{"dirgate", "bare"}, rep) {
					r, err := runOne(ctx, stdout, targets[name], w, load.Options{Concurrency: o.concurrency, Duration: o.duration,
						Requests: o.requests, Warmup: o.warmup, Seed: uint64(rep), Processes: procs[name]}, rep)
					if err != nil {
						return err
					}
					reports = append(reports, r)
				}
			}
		}
	}
	sums, err := writeMedians(stdout, o, reports)
	if err != nil {
		return err
	}
	cmp := forestCompare(reports, sums, wls)
	if err := writeForestCompare(stdout, cmp); err != nil {
		return err
	}
	if o.jsonFile != "" {
		b, err := json.MarshalIndent(map[string]any{"machine": env, "options": o.public(), "reports": reports, "summary": sums,
			"crossAgainstHome": cmp}, "", "  ")
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

func rotateWorkloads(w []load.Workload, n int) []load.Workload {
	n %= len(w)
	return append(append([]load.Workload(nil), w[n:]...), w[:n]...)
}

// forestExpect computes the expected answers over a router of its own (both
// domains' LDAP upstreams, as cmd/dirgate wires them without the breakers and the
// cache) and the run's policy, on connections of this process.
func forestExpect(ctx context.Context, fc load.ForestConfig, policyDir string, w load.Workload) (*load.Checker, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var doms []domains.Domain
	for _, c := range []load.LDAPConfig{fc.Corp, fc.Fabrikam} {
		d, err := ldap.Config{URL: c.URL, BindDN: c.BindDN, PasswordFile: c.PasswordFile, BaseDN: c.BaseDN, CAFile: c.CAFile, Logger: quiet}.Open(ctx)
		if err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
		defer d.Close()
		doms = append(doms, domains.Domain{BaseDN: c.BaseDN, SID: d.DomainSID(), Dir: d, Schema: d})
	}
	r, err := domains.Config{Domains: doms, Logger: quiet}.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	authz, err := policy.Open(ctx, policy.Config{Dir: policyDir, Logger: quiet})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer authz.Close()
	return load.Expect(ctx, &dirgate.MemberService{Dir: r, Authz: authz}, w)
}

// forestRow is one pair's cross-domain listing against its one-domain listing.
type forestRow struct {
	Cross, Home string
	// CrossCPU and HomeCPU are dirgate's median server CPU per request (µs); the
	// ratios against bare are paired per repetition.
	CrossCPU, HomeCPU         float64
	CrossVsBare, HomeVsBare   load.Spread
	CrossKB, HomeKB           float64
	CPU                       load.Spread `json:"cpuCrossOverHome"`
	Throughput                load.Spread `json:"throughputCrossOverHome"`
	CrossThroughput, HomeTput float64
}

func forestCompare(reports []*load.Report, sums []load.Summary, wls []load.Workload) []forestRow {
	var out []forestRow
	for i := 0; i+1 < len(wls); i += 2 {
		cross, home := wls[i].Name, wls[i+1].Name
		cpu, tput := load.PairedWorkloads(reports, "dirgate", cross, home)
		row := forestRow{Cross: cross, Home: home, CPU: load.SpreadOf(cpu), Throughput: load.SpreadOf(tput),
			CrossVsBare: load.SpreadOf(load.Paired(reports, cross, "dirgate", "bare")),
			HomeVsBare:  load.SpreadOf(load.Paired(reports, home, "dirgate", "bare"))}
		if s, ok := load.Find(sums, cross, "dirgate"); ok {
			row.CrossCPU, row.CrossKB, row.CrossThroughput = s.ServerCPU, s.KBPerRequest, s.Throughput
		}
		if s, ok := load.Find(sums, home, "dirgate"); ok {
			row.HomeCPU, row.HomeKB, row.HomeTput = s.ServerCPU, s.KBPerRequest, s.Throughput
		}
		out = append(out, row)
	}
	return out
}

func writeForestCompare(w io.Writer, rows []forestRow) error {
	fmt.Fprintln(w, "\ncross-domain listing against the one-domain listing of the same size, dirgate, paired per repetition:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cross\thome\tKB cross/home\tµs/req cross/home\tCPU cross÷home\treq/s cross÷home\tcross CPU×bare\thome CPU×bare\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1f/%.1f\t%.0f/%.0f\t%s\t%s\t%s\t%s\t\n", r.Cross, r.Home, r.CrossKB, r.HomeKB, r.CrossCPU, r.HomeCPU,
			r.CPU, r.Throughput, r.CrossVsBare, r.HomeVsBare)
	}
	return tw.Flush()
}

// parseSizes reads -forest: group sizes (direct members), each at least 2.
func parseSizes(spec string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("-forest: %q is not a group size of 2 or more", f)
		}
		out = append(out, n)
	}
	return out, nil
}
