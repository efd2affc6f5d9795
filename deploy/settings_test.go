package deploy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository's top directory: go test runs in deploy/.
const repoRoot = ".."

// otelSettings are the standard OpenTelemetry variables the deployment sets; the
// telemetry package reads them through the OpenTelemetry SDK.
var otelSettings = map[string]bool{
	"OTEL_EXPORTER_OTLP_ENDPOINT": true,
	"OTEL_SERVICE_NAME":           true,
	"OTEL_RESOURCE_ATTRIBUTES":    true,
}

// settingsDoc is the reference of every setting, one table row each.
const settingsDoc = "docs/settings.md"

// settingRow matches a row of docs/settings.md's tables.
var settingRow = regexp.MustCompile("(?m)^\\| `(DIRGATE_[A-Z0-9_]+)` \\|")

var settingsOnce = sync.OnceValues(func() (map[string]bool, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, settingsDoc))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", settingsDoc, err)
	}
	set := map[string]bool{}
	for _, m := range settingRow.FindAllStringSubmatch(string(data), -1) {
		set[m[1]] = true
	}
	if !set["DIRGATE_LISTEN"] || !set["DIRGATE_LDAP_URL"] {
		return nil, fmt.Errorf("%s: settings tables not found (no DIRGATE_LISTEN / DIRGATE_LDAP_URL rows)", settingsDoc)
	}
	return set, nil
})

// documentedDefault returns the default docs/settings.md gives a setting ("" when
// it has none or the row is missing).
func documentedDefault(name string) string {
	data, err := os.ReadFile(filepath.Join(repoRoot, settingsDoc))
	if err != nil {
		return ""
	}
	m := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\| [^|]* \\| `([^`]*)` \\|").FindSubmatch(data)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// documentedSettings returns the settings docs/settings.md lists, which
// cmd/dirgate's own test keeps equal to the settings dirgate accepts.
func documentedSettings(t *testing.T) map[string]bool {
	t.Helper()
	set, err := settingsOnce()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// checkSettingName reports an environment variable that dirgate would not read:
// a DIRGATE_ name outside docs/settings.md, or an OTEL_ name this
// deployment does not mean to set. helper lists other names allowed in this place
// (variables used only to build another one, such as POD_NAME).
func checkSettingName(settings map[string]bool, name string, helper map[string]bool) error {
	switch {
	case strings.HasPrefix(name, "DIRGATE_"):
		if settings[name] {
			return nil
		}
		return fmt.Errorf("%s is not a dirgate setting (%s)", name, settingsDoc)
	case strings.HasPrefix(name, "OTEL_"):
		if otelSettings[name] {
			return nil
		}
		return fmt.Errorf("%s is not among the OpenTelemetry variables this deployment uses (otelSettings)", name)
	case goRuntimeSettings[name]:
		return nil
	case helper[name]:
		return nil
	}
	return fmt.Errorf("%s is neither a dirgate setting, an OpenTelemetry variable nor a Go runtime variable the deployment sets", name)
}

// goRuntimeSettings are the Go runtime's variables a deployment may set
// (docs/operations.md, "Memory").
var goRuntimeSettings = map[string]bool{"GOMEMLIMIT": true}

// checkRedisSecret reports settings that dirgate refuses at start: Redis without the
// secret file keying the HMACs of what it keeps there (docs/auth.md, "What Redis
// holds").
func checkRedisSecret(env map[string]string) error {
	if env["DIRGATE_REDIS_ADDR"] != "" && env["DIRGATE_SECRET_FILE"] == "" {
		return fmt.Errorf("DIRGATE_REDIS_ADDR is set without DIRGATE_SECRET_FILE: dirgate refuses to start")
	}
	return nil
}

// checkTrustedProxies reports a DIRGATE_TRUSTED_PROXIES that leaves the throttle
// counting every client behind the ingress as one (unset), that dirgate refuses (not
// CIDRs), or that trusts every address, which would let any client name its own
// throttle key in X-Forwarded-For (docs/api.md, "Throttling of failed
// authentications").
func checkTrustedProxies(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("DIRGATE_TRUSTED_PROXIES is not set: behind the ingress every client would share one throttle count")
	}
	for _, s := range strings.Split(v, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		switch {
		case err != nil:
			return fmt.Errorf("DIRGATE_TRUSTED_PROXIES item %q is not a CIDR: dirgate refuses to start", s)
		case p.Bits() == 0:
			return fmt.Errorf("DIRGATE_TRUSTED_PROXIES item %q trusts every address: any client could choose its throttle key", s)
		}
	}
	return nil
}

func TestCheckTrustedProxies(t *testing.T) {
	for v, ok := range map[string]bool{
		"10.244.0.0/16": true, "10.244.0.0/16, fd00:10:244::/56": true,
		"": false, " ": false, "10.244.0.0": false, "0.0.0.0/0": false, "10.0.0.0/8,::/0": false,
	} {
		if err := checkTrustedProxies(v); (err == nil) != ok {
			t.Errorf("checkTrustedProxies(%q) = %v", v, err)
		}
	}
}

func TestSettingsKnown(t *testing.T) {
	settings := documentedSettings(t)
	tests := []struct {
		name    string
		setting string
		helper  map[string]bool
		wantErr bool
	}{
		// A documented setting passes.
		{name: "documented setting", setting: "DIRGATE_LDAP_URL"},
		// A setting another change is adding passes while it is pending.
		{name: "pending setting", setting: "DIRGATE_POLICY_DIR"},
		// A misspelt setting would be ignored by dirgate: it must fail.
		{name: "typo", setting: "DIRGATE_LDAP_UR", wantErr: true},
		// An OpenTelemetry variable the deployment does not mean to set fails.
		{name: "unexpected otel", setting: "OTEL_TRACES_SAMPLER_ARG", wantErr: true},
		// A helper variable passes only where it is declared as one.
		{name: "helper allowed", setting: "POD_NAME", helper: map[string]bool{"POD_NAME": true}},
		{name: "helper elsewhere", setting: "POD_NAME", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSettingName(settings, tt.setting, tt.helper)
			if (err != nil) != tt.wantErr {
				t.Errorf("checkSettingName(%s) = %v, want error %v", tt.setting, err, tt.wantErr)
			}
		})
	}
}

// TestMentionedSettingsExist scans every deployment file, comments and README
// included, for DIRGATE_* names: a renamed or removed setting must not live on in
// advice to operators.
func TestMentionedSettingsExist(t *testing.T) {
	settings := documentedSettings(t)
	name := regexp.MustCompile(`DIRGATE_[A-Z0-9_]*[A-Z0-9]`)
	seen := 0
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range name.FindAllString(string(data), -1) {
			seen++
			if err := checkSettingName(settings, n, nil); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Errorf("only %d DIRGATE_ names found in deploy/: the scan no longer reads the files", seen)
	}
}
