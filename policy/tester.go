package policy

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	bundled "github.com/dirgate/dirgate/rego"
)

// TestSummary counts the outcomes of a policy directory's Rego tests.
type TestSummary struct {
	Passed, Failed, Errored, Skipped int
}

// OK reports whether the run had tests and all of them passed (or were skipped).
func (s TestSummary) OK() bool { return s.Failed == 0 && s.Errored == 0 && s.Passed > 0 }

// TestOptions are RunTests' options.
type TestOptions struct {
	// Verbose reports every test, not only failures (opa test -v).
	Verbose bool
	// Run, when set, runs only the tests whose name matches this regular
	// expression (opa test --run).
	Run string
}

// RunTests runs the Rego unit tests (test_ rules in *_test.rego files) of a policy
// directory with OPA's tester and reports them on w as `opa test` does. dir ""
// means the bundled policy. It returns an error when the directory cannot be read
// or compiled, or when its data has mistakes the policy names (data_errors:
// the gateway would not load it); failing tests are counted in the summary.
func RunTests(ctx context.Context, dir string, opts TestOptions, w io.Writer) (TestSummary, error) {
	var fsys fs.FS = bundled.FS
	if dir != "" {
		fsys = os.DirFS(dir)
	}
	return RunTestsFS(ctx, fsys, opts, w)
}

// RunTestsFS is RunTests over files in a policy directory's layout (a bundle's:
// opaconfig.ReadBundleFile).
func RunTestsFS(ctx context.Context, fsys fs.FS, opts TestOptions, w io.Writer) (TestSummary, error) {
	src, err := readSource(fsys, loadOptions{tests: true})
	if err != nil {
		return TestSummary{}, err
	}
	store := inmem.NewFromObject(src.data)
	compiler := ast.NewCompiler().WithEnablePrintStatements(true)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(store).
		CapturePrintOutput(true).
		SetDefaultRegoVersion(ast.RegoV1)
	if opts.Run != "" {
		runner = runner.Filter(opts.Run)
	}
	ch, err := runner.Run(ctx, src.modules)
	if err != nil {
		return TestSummary{}, fmt.Errorf("run policy tests: %w", err)
	}
	var sum TestSummary
	counted := make(chan *tester.Result)
	go func() {
		defer close(counted)
		for r := range ch {
			switch {
			case r.Skip:
				sum.Skipped++
			case r.Error != nil:
				sum.Errored++
			case r.Fail:
				sum.Failed++
			default:
				sum.Passed++
			}
			counted <- r
		}
	}()
	rep := tester.PrettyReporter{Output: w, Verbose: opts.Verbose, FailureLine: true}
	if err := rep.Report(counted); err != nil {
		return sum, fmt.Errorf("report policy tests: %w", err)
	}
	// The directory's own data, which the gateway would refuse to load when the
	// policy names mistakes in it (data_errors), fails the run too, however the
	// tests went: the tests replace the data they decide on.
	if err := (&version{compiler: compiler, store: store}).checkData(ctx); err != nil {
		return sum, err
	}
	return sum, nil
}
