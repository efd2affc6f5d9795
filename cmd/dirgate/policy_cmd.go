package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/dirgate/dirgate/policy"
)

// maxEvalInput bounds the input document of `dirgate policy eval`.
const maxEvalInput = 8 << 20

const policyUsage = `Usage:
  dirgate policy test [-v] [--run REGEX] [DIR]
      run the Rego unit tests (*_test.rego) of a policy directory, as opa test does;
      exits non-zero when a test fails. DIR defaults to the bundled policy. Here and
      below, DIR may also be a bundle file (opa build's .tar.gz).
  dirgate policy eval --input FILE [DIR]
      evaluate data.dirgate.authz.allow for one input document (docs/policy.md) with
      the gateway's engine and print the decision as JSON. DIR defaults to the
      bundled policy.
  dirgate policy diff --subject ID --group ID [--include-indirect] [--json] [--fail-on-difference] OLD_DIR NEW_DIR
      decide every member of the group (DN, GUID or SID) for the subject under both
      policy directories and print where they differ. The directory is the one the
      gateway is configured with (DIRGATE_* variables, DIRGATE_CONFIG); "" names the
      bundled policy.
`

// runPolicy serves `dirgate policy ...`: the tools a security team uses to check a
// policy directory before deploying it (docs/policy.md).
func runPolicy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return errors.New("policy: a subcommand is required (test, eval or diff)")
	}
	switch args[0] {
	case "test":
		return policyTest(ctx, args[1:], stdout, stderr)
	case "eval":
		return policyEval(ctx, args[1:], stdout, stderr)
	case "diff":
		return policyDiff(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, policyUsage)
		return nil
	}
	fmt.Fprint(stderr, policyUsage)
	return fmt.Errorf("policy: unknown subcommand %q", args[0])
}

func policyFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dirgate policy "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	return fs
}

// policyDir returns the optional DIR argument ("" for the bundled policy).
func policyDir(fs *flag.FlagSet) (string, error) {
	switch fs.NArg() {
	case 0:
		return "", nil
	case 1:
		return fs.Arg(0), nil
	}
	return "", fmt.Errorf("policy %s: expected at most one directory, got %q", fs.Name(), fs.Args())
}

func policyTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := policyFlags("test", stderr)
	verbose := fs.Bool("v", false, "report every test, not only failures")
	run := fs.String("run", "", "run only the tests whose name matches this regular expression")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	dir, err := policyDir(fs)
	if err != nil {
		return err
	}
	pdir, files, err := policyArg(dir)
	if err != nil {
		return fmt.Errorf("policy test: %w", err)
	}
	opts := policy.TestOptions{Verbose: *verbose, Run: *run}
	var sum policy.TestSummary
	if files != nil {
		sum, err = policy.RunTestsFS(ctx, files, opts, stdout)
	} else {
		sum, err = policy.RunTests(ctx, pdir, opts, stdout)
	}
	if err != nil {
		return fmt.Errorf("policy test: %w", err)
	}
	if !sum.OK() {
		if sum.Passed+sum.Failed+sum.Errored == 0 {
			return errors.New("policy test: no tests ran")
		}
		return fmt.Errorf("policy test: %d failed, %d errors", sum.Failed, sum.Errored)
	}
	return nil
}

func policyEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := policyFlags("eval", stderr)
	inputFile := fs.String("input", "", "JSON file holding the input document (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	dir, err := policyDir(fs)
	if err != nil {
		return err
	}
	if *inputFile == "" {
		return errors.New("policy eval: --input FILE is required")
	}
	in, err := readEvalInput(*inputFile)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pcfg, err := policyConfigOf(dir)
	if err != nil {
		return fmt.Errorf("policy eval: %w", err)
	}
	pcfg.Logger = logger
	authz, err := policy.Open(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("policy eval: %w", err)
	}
	defer authz.Close()
	d, err := authz.Decide(ctx, in)
	if err != nil {
		return fmt.Errorf("policy eval: %w", err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("policy eval: encode decision: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// readEvalInput reads an input document in the shape the gateway builds, refusing
// members the gateway never sends: a typo would otherwise be evaluated as absent.
func readEvalInput(path string) (policy.Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return policy.Input{}, fmt.Errorf("policy eval: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxEvalInput+1))
	if err != nil {
		return policy.Input{}, fmt.Errorf("policy eval: read %s: %w", path, err)
	}
	if len(raw) > maxEvalInput {
		return policy.Input{}, fmt.Errorf("policy eval: %s is larger than %d bytes", path, maxEvalInput)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var in policy.Input
	if err := dec.Decode(&in); err != nil {
		return policy.Input{}, fmt.Errorf("policy eval: input %s: %w", path, err)
	}
	if dec.More() {
		return policy.Input{}, fmt.Errorf("policy eval: input %s: more than one JSON document", path)
	}
	switch in.Action {
	case policy.ActionView, policy.ActionRemove, policy.ActionAdd:
	default:
		return policy.Input{}, fmt.Errorf("policy eval: input %s: action must be %q, %q or %q, not %q", path, policy.ActionView, policy.ActionRemove, policy.ActionAdd, in.Action)
	}
	return in, nil
}
