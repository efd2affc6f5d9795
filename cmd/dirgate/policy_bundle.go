package main

import (
	"io/fs"
	"os"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
)

// policyArg reads a DIR argument of the policy commands: a policy directory, or a
// bundle file (opa build's .tar.gz), which is read into the directory's layout so
// that a bundle is tested, evaluated and compared as the gateway would load it.
func policyArg(arg string) (dir string, files fs.FS, err error) {
	if arg == "" {
		return "", nil, nil
	}
	if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
		files, err := opaconfig.ReadBundleFile(arg)
		return "", files, err
	}
	return arg, nil, nil // a directory, or an error policy reports
}

// policyConfigOf is the policy configuration of a DIR argument.
func policyConfigOf(arg string) (policy.Config, error) {
	dir, files, err := policyArg(arg)
	return policy.Config{Dir: dir, Files: files, Source: arg}, err
}

// candidateConfigOf is the candidate configuration of a DIR argument.
func candidateConfigOf(arg string) (candidate.Config, error) {
	dir, files, err := policyArg(arg)
	return candidate.Config{Dir: dir, Files: files, Source: arg}, err
}
