package opaconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/util"
)

// maxConfigBytes bounds the configuration file: it is written by people.
const maxConfigBytes = 1 << 20

// honoured are the keys of OPA's configuration dirgate acts on (docs/policy.md,
// "Policy from a bundle service"). The others are reported at start-up and ignored:
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
	errs = append(errs, f.checkServices()...)
	if len(f.bundles) == 0 {
		errs = append(errs, errors.New(`opa config: "bundles" names no bundle; the policy comes from the bundles`))
	}
	return f, errors.Join(errs...) // f is returned with its errors, for CheckFile
}

// managerConfig returns the configuration of one plugin manager: the services,
// keys, labels, status and persistence directory of the file, the bundles named,
// and its decision_logs when logs is set.
//
// Every service's credentials are handed to a boundedAuth plugin (bound.go), so
// that each bundle download is bounded to maxBytes, compressed and decompressed.
func (f *file) managerConfig(bundles []string, logs bool, maxBytes int64) ([]byte, error) {
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
	// Each bundle's files are bounded by size_limit_bytes (OPA's, checked against
	// each tar header before the file is read); without one, by maxBytes rather
	// than OPA's 1 GiB. The total is bounded by boundedAuth.
	for n, b := range picked {
		m, _ := b.(map[string]any)
		if m == nil {
			continue
		}
		if _, ok := m["size_limit_bytes"]; !ok {
			cp := maps.Clone(m)
			cp["size_limit_bytes"] = maxBytes
			picked[n] = cp
		}
	}
	out["services"] = boundServices(f.raw["services"])
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
// The file is checked against the default Trust: unsigned bundles and plain HTTP
// services are errors.
func CheckFile(path string) (ignored []string, err error) {
	f, err := readFile(path)
	if f != nil {
		ignored = f.ignored
		if _, terr := f.checkTrust(Trust{}); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	return ignored, err
}

// services returns the services of the file by name, in either of OPA's forms (a
// map of names, or a list of services each with its "name").
func (f *file) services() map[string]map[string]any {
	out := map[string]map[string]any{}
	switch s := f.raw["services"].(type) {
	case map[string]any:
		for n, v := range s {
			if m, ok := v.(map[string]any); ok {
				out[n] = m
			}
		}
	case []any:
		for _, v := range s {
			if m, ok := v.(map[string]any); ok {
				n, _ := m["name"].(string)
				out[n] = m
			}
		}
	}
	return out
}

// checkServices refuses what the file cannot mean for dirgate: credentials from
// an OPA plugin (dirgate has none).
func (f *file) checkServices() []error {
	var errs []error
	services := f.services()
	for _, n := range sortedKeys(services) {
		if c, _ := services[n]["credentials"].(map[string]any); c != nil && c["plugin"] != nil {
			errs = append(errs, fmt.Errorf("opa config: service %s: dirgate does not take credentials.plugin (OPA plugins are not built in)", n))
		}
	}
	return errs
}

// Trust says which of the file's weaker choices dirgate accepts. Each is refused
// by default: whoever can serve or alter an unsigned bundle, or answer a plain
// HTTP service, decides the policy (docs/policy.md, "What the bundle service
// decides").
type Trust struct {
	// Unsigned accepts a bundle without a signing block (or with
	// allow_unsigned_delta_bundles): the bundle service alone vouches for it.
	Unsigned bool
	// PlainHTTP accepts services at http:// URLs or with allow_insecure_tls:
	// anyone on the path can answer them and read their credentials.
	PlainHTTP bool
}

// checkTrust returns the file's choices Trust does not accept as errors, and
// those it accepts as warnings, one each, for the log at start.
func (f *file) checkTrust(t Trust) (warnings []string, err error) {
	var errs []error
	report := func(allowed bool, setting, msg string) {
		if allowed {
			warnings = append(warnings, msg+" (accepted: "+setting+" is set)")
		} else {
			errs = append(errs, fmt.Errorf("opa config: %s; set %s to accept it", msg, setting))
		}
	}
	all, _ := f.raw["bundles"].(map[string]any)
	for _, n := range f.bundles {
		b, _ := all[n].(map[string]any)
		sig, _ := b["signing"].(map[string]any)
		switch {
		case sig == nil:
			report(t.Unsigned, "DIRGATE_OPA_ALLOW_UNSIGNED_BUNDLES",
				fmt.Sprintf("bundle %s has no signing block: its policy would be whatever the service returns, unverified", n))
		case sig["allow_unsigned_delta_bundles"] == true:
			report(t.Unsigned, "DIRGATE_OPA_ALLOW_UNSIGNED_BUNDLES",
				fmt.Sprintf("bundle %s sets signing.allow_unsigned_delta_bundles: a delta bundle would change its data unverified", n))
		}
	}
	services := f.services()
	for _, n := range sortedKeys(services) {
		s := services[n]
		raw, _ := s["url"].(string)
		if u, err := url.Parse(raw); err == nil && strings.EqualFold(u.Scheme, "http") {
			report(t.PlainHTTP, "DIRGATE_OPA_ALLOW_PLAIN_HTTP",
				fmt.Sprintf("service %s is plain HTTP (%s): whoever answers it serves the bundles and reads the credentials sent to it", n, u.Redacted()))
		}
		if s["allow_insecure_tls"] == true {
			report(t.PlainHTTP, "DIRGATE_OPA_ALLOW_PLAIN_HTTP",
				fmt.Sprintf("service %s sets allow_insecure_tls: any certificate is accepted for it", n))
		}
	}
	return warnings, errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
