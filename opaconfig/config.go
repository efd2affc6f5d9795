package opaconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/open-policy-agent/opa/v1/util"
)

// maxConfigBytes bounds the configuration file: it is written by people.
const maxConfigBytes = 1 << 20

// honoured are the keys of OPA's configuration dirgate acts on (docs/policy.md,
// "The OPA configuration file"). The others are reported at start-up and ignored:
// they configure OPA's own server, storage or evaluation, which dirgate does not
// run, or load code (plugins, discovery) dirgate does not take.
var honoured = []string{"services", "labels", "keys", "bundles", "decision_logs", "status", "persistence_directory"}

// refused are keys whose meaning dirgate cannot keep: ignoring them would take
// policy from somewhere else than the file says.
var refused = map[string]string{
	"bundle":    `the deprecated "bundle" key: name the bundle under "bundles"`,
	"discovery": `"discovery" (a configuration downloaded at run time): list the bundles in the file`,
}

// file is a parsed configuration file.
type file struct {
	raw map[string]any
	// ignored are the top-level keys dirgate does not act on.
	ignored []string
	// bundles are the names of the bundles, sorted.
	bundles []string
}

// readFile reads an OPA configuration file (YAML or JSON, as `opa run
// --config-file` takes) and checks what dirgate needs of it.
func readFile(path string) (*file, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("opa config %s: larger than %d bytes", path, maxConfigBytes)
	}
	return parseFile(b)
}

func parseFile(b []byte) (*file, error) {
	var raw map[string]any
	if err := util.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	if raw == nil {
		return nil, errors.New("opa config: the file is empty")
	}
	f := &file{raw: raw}
	var errs []error
	for k := range raw {
		if why, ok := refused[k]; ok {
			errs = append(errs, fmt.Errorf("opa config: dirgate does not take %s", why))
		} else if !slices.Contains(honoured, k) {
			f.ignored = append(f.ignored, k)
		}
	}
	sort.Strings(f.ignored)
	if dl, ok := raw["decision_logs"].(map[string]any); ok && dl["plugin"] != nil {
		errs = append(errs, errors.New(`opa config: dirgate does not take decision_logs.plugin (OPA plugins are not built in)`))
	}
	bundles, _ := raw["bundles"].(map[string]any)
	for name, b := range bundles {
		f.bundles = append(f.bundles, name)
		if b, _ := b.(map[string]any); b != nil && b["trigger"] == "manual" {
			errs = append(errs, fmt.Errorf(`opa config: bundle %s: trigger "manual": nothing in dirgate triggers a download`, name))
		}
	}
	if dl, ok := raw["decision_logs"].(map[string]any); ok {
		if rep, _ := dl["reporting"].(map[string]any); rep != nil && rep["trigger"] == "manual" {
			errs = append(errs, errors.New(`opa config: decision_logs: trigger "manual": nothing in dirgate triggers an upload`))
		}
	}
	sort.Strings(f.bundles)
	if len(f.bundles) == 0 {
		errs = append(errs, errors.New(`opa config: "bundles" names no bundle; the policy comes from the bundles`))
	}
	return f, errors.Join(errs...) // f is returned with its errors, for CheckFile
}

// managerConfig returns the configuration of one plugin manager: the services,
// keys, labels, status and persistence directory of the file, the bundles named,
// and its decision_logs when logs is set.
func (f *file) managerConfig(bundles []string, logs bool) ([]byte, error) {
	out := map[string]any{}
	for _, k := range honoured {
		if v, ok := f.raw[k]; ok {
			out[k] = v
		}
	}
	all, _ := f.raw["bundles"].(map[string]any)
	picked := map[string]any{}
	for _, b := range bundles {
		picked[b] = all[b]
	}
	out["bundles"] = picked
	delete(out, "decision_logs")
	if section, upload, _ := f.decisionLogs(); logs && upload {
		out["decision_logs"] = section
	}
	if !logs {
		delete(out, "status")
	}
	return json.Marshal(out)
}

// decisionLogs returns the decision_logs section: whether decisions go to a
// service (OPA's plugin), and whether they go to the console (dirgate's line on
// stdout). OPA's plugin is given the section without "console", which dirgate
// serves itself.
func (f *file) decisionLogs() (section map[string]any, upload, console bool) {
	dl, ok := f.raw["decision_logs"].(map[string]any)
	if !ok {
		return nil, false, false
	}
	console, _ = dl["console"].(bool)
	section = map[string]any{}
	for k, v := range dl {
		if k != "console" {
			section[k] = v
		}
	}
	_, hasService := dl["service"]
	services, _ := f.raw["services"].(map[string]any)
	list, _ := f.raw["services"].([]any)
	// OPA uploads to the first service when none is named, unless console is set.
	upload = hasService || (!console && (len(services) > 0 || len(list) > 0))
	return section, upload, console
}

// CheckFile reads an OPA configuration file as Open does, without starting
// anything: the start-up errors it would give, and the keys it would ignore.
func CheckFile(path string) (ignored []string, err error) {
	f, err := readFile(path)
	if f != nil {
		ignored = f.ignored
	}
	return ignored, err
}
