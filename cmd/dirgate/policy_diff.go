package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/explain"
)

// policyDiff serves `dirgate policy diff`: the decisions API's comparison from the
// command line, for the CI jobs of policy repositories. The directory comes from
// the gateway's own settings (environment, DIRGATE_CONFIG), so the comparison is on
// real callers and real groups.
func policyDiff(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := policyFlags("diff", stderr)
	subject := fs.String("subject", "", "the caller whose decisions are compared, by DN, GUID or SID (required)")
	group := fs.String("group", "", "the group whose members are decided, by DN, GUID or SID (required)")
	indirect := fs.Bool("include-indirect", false, "decide the nested listing")
	asJSON := fs.Bool("json", false, "print the decisions API's JSON answer instead of the differences")
	fail := fs.Bool("fail-on-difference", false, "exit non-zero when the policies decide some object differently")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("policy diff: expected OLD_DIR and NEW_DIR, got %q", fs.Args())
	}
	subjectID, err := dirgate.ParseIdentifier(*subject)
	if err != nil {
		return fmt.Errorf("policy diff: --subject: %w", err)
	}
	groupID, err := dirgate.ParseIdentifier(*group)
	if err != nil {
		return fmt.Errorf("policy diff: --group: %w", err)
	}
	cfg, err := LoadConfig(nil, getenv, stderr)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	m := NewMain(cfg, stdout, stderr)
	m.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m.ready = &readiness{}
	defer m.Close()
	dir, err := m.openDirectory(ctx)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	svc := &dirgate.MemberService{Dir: dir}
	pcfg, err := policyConfigOf(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	ccfg, err := candidateConfigOf(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	ccfg.Logger, ccfg.Sample = m.Logger, new(float64) // loaded to compare, deciding no request
	cand, err := candidate.Open(ctx, ccfg)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	if err := cand.Ready(); err != nil || cand.Status().Revision == "" {
		return fmt.Errorf("policy diff: %s does not load: %s", fs.Arg(1), cand.Status().LastError)
	}
	pcfg.Logger, pcfg.Shadow, pcfg.Schema = m.Logger, cand, m.schema
	authz, err := policy.Open(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	p, err := svc.Principal(ctx, subjectID)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	opts := dirgate.ListOptions{IncludeIndirect: *indirect}
	g, objs, err := svc.Unfiltered(ctx, groupID, opts)
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	ex, err := explain.NewExplainer(authz, m.Logger).Compare(ctx, explain.Query{Subject: p, Group: g, Options: opts, Objects: objs})
	if err != nil {
		return fmt.Errorf("policy diff: %w", err)
	}
	n := printDiff(stdout, ex, *asJSON)
	if *fail && n > 0 {
		return fmt.Errorf("policy diff: %d decisions differ", n)
	}
	return nil
}

// printDiff prints one line per decision that differs (or the JSON answer) and
// returns how many differ.
func printDiff(w io.Writer, ex explain.Explanation, asJSON bool) int {
	n := 0
	var lines []string
	for _, o := range ex.Objects {
		for _, d := range []struct {
			action        string
			before, after bool
		}{{"view", o.Active.View, o.Candidate.View}, {"remove", o.Active.Remove, o.Candidate.Remove}} {
			if d.before == d.after {
				continue
			}
			n++
			change := map[bool]string{true: "newly_allowed", false: "newly_denied"}[d.after]
			lines = append(lines, fmt.Sprintf("%-6s %-13s %s %s", d.action, change, o.GUID, o.DN))
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(ex, "", "  ")
		fmt.Fprintf(w, "%s\n", b)
		return n
	}
	fmt.Fprintf(w, "# %s in %s: %s -> %s, %d objects, %d decisions differ\n", ex.Subject.DN, ex.Group.DN,
		ex.ActiveRevision, ex.CandidateRevision, len(ex.Objects), n)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return n
}
