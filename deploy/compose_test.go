package deploy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// loadCompose loads a compose file the way `docker compose` does: validated against
// the Compose specification's JSON schema, interpolated, normalised, with paths made
// absolute relative to deploy/.
func loadCompose(content []byte) (*types.Project, error) {
	dir, err := filepath.Abs(".")
	if err != nil {
		return nil, err
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml"), Content: content}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName("dirgate", true)
		o.ResolvePaths = true
	})
}

// otelConfig is the part of the collector's configuration the checks read.
type otelConfig struct {
	Receivers  map[string]any `json:"receivers"`
	Processors map[string]any `json:"processors"`
	Exporters  map[string]any `json:"exporters"`
	Service    struct {
		Pipelines map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

// mountOf returns the volume of s whose target contains p.
func mountOf(s types.ServiceConfig, p string) (types.ServiceVolumeConfig, bool) {
	for _, v := range s.Volumes {
		if p == v.Target || strings.HasPrefix(p, strings.TrimSuffix(v.Target, "/")+"/") {
			return v, true
		}
	}
	return types.ServiceVolumeConfig{}, false
}

// checkCompose checks the try-out's wiring: the images build from the repository's
// Dockerfiles, every setting exists, every file dirgate reads is mounted from
// somewhere that has it, every address names a service that listens there, and
// only loopback is published.
func checkCompose(p *types.Project, documented map[string]bool) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	root, _ := filepath.Abs(repoRoot)
	deployDir, _ := filepath.Abs(".")
	script, err := os.ReadFile("samba/entrypoint.sh")
	if err != nil {
		return []string{err.Error()}
	}
	entryScript := string(script)
	sharedDefault := ""
	if m := regexp.MustCompile(`SHARED=\$\{DC_SHARED_DIR:-([^}]+)\}`).FindStringSubmatch(entryScript); m != nil {
		sharedDefault = m[1]
	}

	var names []string
	for n := range p.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"dirgate", "otel-collector", "redis", "samba", "secret"}; !slices.Equal(names, want) {
		return []string{fmt.Sprintf("services %v, want %v", names, want)}
	}
	gw, dc, redis, otel, sec := p.Services["dirgate"], p.Services["samba"], p.Services["redis"], p.Services["otel-collector"], p.Services["secret"]

	for name, s := range p.Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				bad("%s publishes port %d on %q: only 127.0.0.1", name, port.Target, port.HostIP)
			}
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					bad("%s mounts %s, which does not exist", name, v.Source)
				}
			}
		}
	}

	// Images: dirgate from deploy/Dockerfile with the repository as context (the
	// Dockerfile copies go.mod and runs make), the DC from deploy/samba.
	if gw.Build == nil || gw.Build.Context != root || gw.Build.Dockerfile != "deploy/Dockerfile" {
		bad("dirgate must build deploy/Dockerfile with the repository root as context, got %+v", gw.Build)
	} else if gw.Build.Args["VERSION"] == nil {
		bad("dirgate build passes no VERSION")
	}
	if dc.Build == nil || dc.Build.Context != filepath.Join(deployDir, "samba") {
		bad("samba must build deploy/samba, got %+v", dc.Build)
	}

	// Settings, and the files and directories they name.
	settings := map[string]string{}
	for k, v := range gw.Environment {
		if v != nil {
			settings[k] = *v
		}
	}
	if err := checkRedisSecret(settings); err != nil {
		bad("dirgate environment: %v", err)
	}
	for k, v := range gw.Environment {
		if err := checkSettingName(documented, k, nil); err != nil {
			bad("dirgate environment: %v", err)
		}
		if v == nil || !strings.HasSuffix(k, "_FILE") && !strings.HasSuffix(k, "_DIR") {
			continue
		}
		m, ok := mountOf(gw, *v)
		switch {
		case !ok:
			bad("dirgate %s=%s is in no mounted volume", k, *v)
		case m.Type == types.VolumeTypeBind:
			local := filepath.Join(m.Source, strings.TrimPrefix(*v, m.Target))
			if _, err := os.Stat(local); err != nil {
				bad("dirgate %s=%s: %s does not exist", k, *v, local)
			}
			if strings.HasSuffix(k, "_FILE") && m.Target == *v {
				bad("dirgate %s mounts the file itself: edits replace the inode and are never seen; mount its directory", k)
			}
		case m.Type == types.VolumeTypeVolume && k == "DIRGATE_SECRET_FILE":
			for _, e := range checkSecretVolume(p, gw, sec, m, *v) {
				bad("dirgate %s=%s: %s", k, *v, e)
			}
		case m.Type == types.VolumeTypeVolume:
			// Written by the DC's entrypoint: the samba service must mount the same
			// volume, writable, where entrypoint.sh publishes, and publish that file.
			var w *types.ServiceVolumeConfig
			for i := range dc.Volumes {
				if dc.Volumes[i].Source == m.Source {
					w = &dc.Volumes[i]
				}
			}
			shared := env(dc, "DC_SHARED_DIR")
			if shared == "" {
				shared = sharedDefault
			}
			switch {
			case w == nil || w.ReadOnly:
				bad("dirgate %s=%s: volume %s is not written by the samba service", k, *v, m.Source)
			case w.Target != shared:
				bad("samba mounts %s at %s, but entrypoint.sh publishes in %s", m.Source, w.Target, shared)
			case !strings.Contains(entryScript, `"$SHARED/`+strings.TrimPrefix(*v, m.Target+"/")+`"`):
				bad("dirgate %s=%s: entrypoint.sh publishes no such file", k, *v)
			}
		}
	}
	// The secret is generated at the first start, never a file of the repository:
	// dirgate refuses the one this directory once committed (cmd/dirgate/published.go).
	if m, ok := mountOf(gw, env(gw, "DIRGATE_SECRET_FILE")); ok && m.Type != types.VolumeTypeVolume {
		bad("dirgate DIRGATE_SECRET_FILE must be generated at the first start into a volume (the secret service), not mounted from %s", m.Source)
	}
	for _, k := range []string{"DIRGATE_UPSTREAM", "DIRGATE_LDAP_URL", "DIRGATE_LDAP_PASSWORD_FILE", "DIRGATE_TOKENS_FILE", "DIRGATE_POLICY_DIR", "DIRGATE_REDIS_ADDR"} {
		if env(gw, k) == "" {
			bad("dirgate: %s is not set", k)
		}
	}

	// The hardening of the Kubernetes pod, as far as compose can express it.
	if gw.User != "65532:65532" || !gw.ReadOnly || !slices.Contains(gw.CapDrop, "ALL") || !slices.Contains(gw.SecurityOpt, "no-new-privileges:true") {
		bad("dirgate must run as 65532:65532, read_only, cap_drop ALL, no-new-privileges")
	}

	// Addresses: each names the service that serves it.
	if u, err := url.Parse(env(gw, "DIRGATE_LDAP_URL")); err != nil || u.Scheme != "ldaps" || u.Hostname() != "samba" {
		bad("DIRGATE_LDAP_URL %q: want ldaps://samba:636", env(gw, "DIRGATE_LDAP_URL"))
	} else if !slices.Contains(strings.Split(env(dc, "DC_TLS_DNS_NAMES"), ","), u.Hostname()) {
		bad("DIRGATE_LDAP_URL host %s is not in the DC certificate's names (DC_TLS_DNS_NAMES=%q)", u.Hostname(), env(dc, "DC_TLS_DNS_NAMES"))
	}
	if d := gw.DependsOn["samba"]; d.Condition != types.ServiceConditionHealthy || dc.HealthCheck == nil || len(dc.HealthCheck.Test) == 0 {
		bad("dirgate must wait for samba to be healthy, and samba needs a healthcheck")
	} else if _, stages := mustParse("samba/Dockerfile"); !slices.Equal([]string(dc.HealthCheck.Test), []string{"CMD", entrypoint(stages), "health"}) {
		bad("samba healthcheck %v: want [CMD %s health]", dc.HealthCheck.Test, entrypoint(stages))
	}
	if h, _, err := net.SplitHostPort(env(gw, "DIRGATE_REDIS_ADDR")); err != nil || h != "redis" {
		bad("DIRGATE_REDIS_ADDR %q: want redis:6379", env(gw, "DIRGATE_REDIS_ADDR"))
	}
	cmd := []string(redis.Command)
	if i, j := slices.Index(cmd, "--save"), slices.Index(cmd, "--appendonly"); i < 0 || j < 0 || i+1 >= len(cmd) || j+1 >= len(cmd) || cmd[i+1] != "" || cmd[j+1] != "no" {
		bad("redis must run with --save \"\" --appendonly no (a cache), got %v", cmd)
	}

	// The collector: its configuration is mounted where --config says, and dirgate's
	// endpoint is its OTLP/HTTP receiver.
	var cfgPath string
	for _, a := range otel.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfgPath = v
		}
	}
	m, ok := mountOf(otel, cfgPath)
	if !ok || m.Type != types.VolumeTypeBind || m.Target != cfgPath {
		bad("otel-collector: --config=%s is not a mounted file", cfgPath)
		return errs
	}
	data, err := os.ReadFile(m.Source)
	if err != nil {
		bad("otel-collector: %v", err)
		return errs
	}
	for _, e := range checkOtelConfig(data, env(gw, "OTEL_EXPORTER_OTLP_ENDPOINT"), env(gw, "DIRGATE_METRICS_LISTEN")) {
		bad("otel-collector: %s", e)
	}
	return errs
}

// checkSecretVolume checks that dirgate's secret file (file, in dirgate's mount m)
// is written at the first start by the secret service into a volume only the two
// share: kept when it exists, handed to dirgate's user, before dirgate starts, by a
// service without network or capabilities beyond chown.
func checkSecretVolume(p *types.Project, gw, sec types.ServiceConfig, m types.ServiceVolumeConfig, file string) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !m.ReadOnly {
		bad("dirgate must mount volume %s read-only", m.Source)
	}
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Source == m.Source && name != "dirgate" && name != "secret" {
				bad("volume %s is also mounted by %s", m.Source, name)
			}
		}
	}
	var w *types.ServiceVolumeConfig
	for i := range sec.Volumes {
		if sec.Volumes[i].Source == m.Source && !sec.Volumes[i].ReadOnly {
			w = &sec.Volumes[i]
		}
	}
	if w == nil {
		return append(errs, fmt.Sprintf("volume %s is not written by the secret service", m.Source))
	}
	path := w.Target + "/" + strings.TrimPrefix(file, m.Target+"/")
	script := strings.Join(append(append([]string{}, sec.Entrypoint...), sec.Command...), " ")
	uid, _, _ := strings.Cut(gw.User, ":")
	switch {
	case !strings.Contains(script, "> "+path):
		bad("the secret service must write %s", path)
	case !strings.Contains(script, "test -s "+path+" ||"):
		bad("the secret service must keep an existing %s (test -s %s ||): a new secret ends every signed-in token", path, path)
	case !strings.Contains(script, "/dev/urandom"):
		bad("the secret service must draw the secret from /dev/urandom")
	case !strings.Contains(script, "chown "+uid+":"):
		bad("the secret service must chown %s to dirgate's user %s", path, uid)
	}
	if d := gw.DependsOn["secret"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
		bad("dirgate must wait for the secret service to complete successfully")
	}
	if sec.NetworkMode != "none" || !sec.ReadOnly || !slices.Equal(sec.CapDrop, []string{"ALL"}) || !slices.Equal(sec.CapAdd, []string{"CHOWN"}) ||
		!slices.Contains(sec.SecurityOpt, "no-new-privileges:true") || len(sec.Ports) > 0 {
		bad("the secret service must run with network_mode none, read_only, cap_drop ALL, cap_add CHOWN only, no-new-privileges, no ports")
	}
	return errs
}

// checkOtelConfig checks that every pipeline uses defined components, that
// dirgate's endpoint reaches the OTLP/HTTP receiver and that the Prometheus
// receiver scrapes dirgate's listening port.
func checkOtelConfig(data []byte, endpoint, listen string) []string {
	var errs []string
	var cfg otelConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return []string{err.Error()}
	}
	if len(cfg.Service.Pipelines) == 0 {
		errs = append(errs, "no pipelines")
	}
	for name, pl := range cfg.Service.Pipelines {
		for kind, ids := range map[string][]string{"receivers": pl.Receivers, "processors": pl.Processors, "exporters": pl.Exporters} {
			defined := map[string]map[string]any{"receivers": cfg.Receivers, "processors": cfg.Processors, "exporters": cfg.Exporters}[kind]
			for _, id := range ids {
				if _, ok := defined[id]; !ok {
					errs = append(errs, fmt.Sprintf("pipeline %s uses %s %s, which is not defined", name, kind, id))
				}
			}
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() != "otel-collector" {
		errs = append(errs, fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT %q: want http://otel-collector:4318", endpoint))
	} else {
		var recv struct {
			OTLP struct {
				Protocols struct {
					HTTP struct {
						Endpoint string `json:"endpoint"`
					} `json:"http"`
				} `json:"protocols"`
			} `json:"otlp"`
		}
		raw, _ := yaml.Marshal(cfg.Receivers)
		_ = yaml.Unmarshal(raw, &recv)
		if _, p, err := net.SplitHostPort(recv.OTLP.Protocols.HTTP.Endpoint); err != nil || p != u.Port() {
			errs = append(errs, fmt.Sprintf("dirgate exports to port %s, the OTLP/HTTP receiver listens on %q", u.Port(), recv.OTLP.Protocols.HTTP.Endpoint))
		}
	}
	if _, port, err := net.SplitHostPort(listen); err != nil || !strings.Contains(string(data), "dirgate:"+port) {
		errs = append(errs, fmt.Sprintf("no scrape target dirgate:%s (DIRGATE_METRICS_LISTEN %q)", port, listen))
	}
	return errs
}

func mustParse(p string) (string, []stage) {
	data, err := os.ReadFile(p)
	if err != nil {
		return "", nil
	}
	stages, _ := parseDockerfile(string(data))
	return string(data), stages
}

// entrypoint returns the first word of the last stage's exec-form ENTRYPOINT.
func entrypoint(stages []stage) string {
	if len(stages) == 0 {
		return ""
	}
	eps := stages[len(stages)-1].all("ENTRYPOINT")
	if len(eps) == 0 {
		return ""
	}
	f := strings.Trim(eps[len(eps)-1].args, `[]" `)
	first, _, _ := strings.Cut(f, `"`)
	return path.Clean(first)
}

func readCompose(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCompose(t *testing.T) {
	p, err := loadCompose(readCompose(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range checkCompose(p, documentedSettings(t)) {
		t.Error(e)
	}
}

// TestComposeChecksCatchMistakes alters compose.yaml one mistake at a time: the
// schema, the loader's consistency checks or checkCompose must name each.
func TestComposeChecksCatchMistakes(t *testing.T) {
	text := string(readCompose(t))
	tests := []struct {
		name, old, new string
		want           string
	}{
		// A misspelt key is an error of the Compose schema, not a silent no-op.
		{name: "schema", old: "    environment:\n      DIRGATE_LISTEN", new: "    enviroment:\n      DIRGATE_LISTEN", want: "enviroment"},
		{name: "wrong type", old: "user: \"65532:65532\"\n    read_only: true", new: "user: \"65532:65532\"\n    read_only: [true]", want: "read_only"},
		{name: "unknown dependency", old: "      redis:\n        condition: service_healthy", new: "      rediz:\n        condition: service_healthy", want: "rediz"},
		{name: "unknown setting", old: "DIRGATE_LOG_LEVEL: info", new: "DIRGATE_LOGLEVEL: info", want: "DIRGATE_LOGLEVEL is not a dirgate setting"},
		{name: "published everywhere", old: "- 127.0.0.1:8080:8080", new: "- 8080:8080", want: "only 127.0.0.1"},
		{name: "missing mount source", old: "./compose/tokens:", new: "./compose/tokenz:", want: "does not exist"},
		{name: "file outside mounts", old: "DIRGATE_TOKENS_FILE: /etc/dirgate/tokens/tokens.yaml", new: "DIRGATE_TOKENS_FILE: /etc/tokens.yaml", want: "is in no mounted volume"},
		{name: "missing file", old: "DIRGATE_TOKENS_FILE: /etc/dirgate/tokens/tokens.yaml", new: "DIRGATE_TOKENS_FILE: /etc/dirgate/tokens/token.yaml", want: "token.yaml does not exist"},
		// The DC writes the password and CA into the shared volume: it must be able to.
		{name: "dc volume read-only", old: "      - dc-shared:/run/dirgate-dc\n", new: "      - dc-shared:/run/dirgate-dc:ro\n", want: "not written by the samba service"},
		{name: "unpublished file", old: "/run/dirgate-dc/svc.pw", new: "/run/dirgate-dc/svc.password", want: "publishes no such file"},
		{name: "file mounted alone", old: "./compose/tokens:/etc/dirgate/tokens:ro", new: "./compose/tokens/tokens.yaml:/etc/dirgate/tokens/tokens.yaml:ro", want: "mounts the file itself"},
		{name: "ldap host not in cert", old: "DC_TLS_DNS_NAMES: samba,localhost", new: "DC_TLS_DNS_NAMES: dc,localhost", want: "not in the DC certificate"},
		{name: "no health wait", old: "      samba:\n        condition: service_healthy", new: "      samba:\n        condition: service_started", want: "wait for samba to be healthy"},
		{name: "wrong healthcheck", old: "[CMD, /usr/local/bin/samba-dc, health]", new: "[CMD, /usr/local/bin/dc, health]", want: "samba healthcheck"},
		{name: "redis persists", old: `--appendonly, "no"`, new: `--appendonly, "yes"`, want: "--appendonly no"},
		{name: "redis without secret", old: "      DIRGATE_SECRET_FILE: /etc/dirgate/secret/secret\n", new: "", want: "DIRGATE_REDIS_ADDR is set without DIRGATE_SECRET_FILE"},
		{name: "otlp port", old: "http://otel-collector:4318", new: "http://otel-collector:4317", want: "OTLP/HTTP receiver"},
		{name: "root", old: `user: "65532:65532"`, new: `user: "0:0"`, want: "must run as 65532"},
		{name: "dockerfile", old: "dockerfile: deploy/Dockerfile", new: "dockerfile: Dockerfile", want: "must build deploy/Dockerfile"},
		// The secret: generated at the first start, kept, never committed.
		{name: "committed secret", old: "      - dirgate-secret:/etc/dirgate/secret:ro\n", new: "      - ./compose/tokens:/etc/dirgate/secret:ro\n", want: "must be generated at the first start"},
		{name: "secret not waited for", old: "condition: service_completed_successfully", new: "condition: service_started", want: "wait for the secret service"},
		{name: "secret replaced at each start", old: "test -s /secret/secret || ", new: "rm -f /secret/secret; ", want: "keep an existing"},
		{name: "secret written elsewhere", old: "      - dirgate-secret:/secret\n", new: "      - dirgate-secret:/secrets\n", want: "must write /secrets/secret"},
		{name: "secret for root", old: "chown 65532:65532", new: "chown 0:0", want: "to dirgate's user 65532"},
		{name: "secret writable by dirgate", old: "dirgate-secret:/etc/dirgate/secret:ro", new: "dirgate-secret:/etc/dirgate/secret", want: "read-only"},
		{name: "secret shared", old: "      - dc-shared:/run/dirgate-dc\n", new: "      - dc-shared:/run/dirgate-dc\n      - dirgate-secret:/run/stolen:ro\n", want: "also mounted by samba"},
		{name: "secret service on the network", old: "    network_mode: none\n", new: "", want: "network_mode none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(text, tt.old) {
				t.Fatalf("compose.yaml no longer contains %q: update this case", tt.old)
			}
			p, err := loadCompose([]byte(strings.Replace(text, tt.old, tt.new, 1)))
			var got string
			if err != nil {
				got = err.Error()
			} else {
				got = strings.Join(checkCompose(p, documentedSettings(t)), "\n")
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want a problem containing %q", got, tt.want)
			}
		})
	}
}

func TestOtelConfigChecks(t *testing.T) {
	data, err := os.ReadFile("otel-collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new string
		want           string // "" for no problem
	}{
		// The real file, unchanged.
		{name: "valid"},
		// A pipeline naming a component that is not configured stops the collector.
		{name: "undefined exporter", old: "exporters: [debug]\n    metrics", new: "exporters: [logging]\n    metrics", want: "exporters logging"},
		// A key the model does not know (misspelt section) must not pass unseen.
		{name: "unknown section", old: "processors:\n  batch", new: "procesors:\n  batch", want: "unknown field"},
		{name: "no scrape of dirgate", old: "targets: [dirgate:9464]", new: "targets: [dirgate:8080]", want: "no scrape target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := string(data)
			if tt.old != "" {
				if !strings.Contains(cfg, tt.old) {
					t.Fatalf("otel-collector.yaml no longer contains %q", tt.old)
				}
				cfg = strings.Replace(cfg, tt.old, tt.new, 1)
			}
			errs := checkOtelConfig([]byte(cfg), "http://otel-collector:4318", "0.0.0.0:9464")
			got := strings.Join(errs, "\n")
			if tt.want == "" && len(errs) > 0 || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("checkOtelConfig: %q, want %q", got, tt.want)
			}
		})
	}
}
