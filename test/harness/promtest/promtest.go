// Package promtest runs a real Prometheus server (Debian's prometheus package, which
// test/run.sh installs) for tests: on a free loopback port, with a temporary
// configuration and data directory, scraping the targets a test gives and
// evaluating its rule files, and it reads the server's HTTP API (queries, alerts).
// The server is stopped and its directory removed when the test ends. Without the
// prometheus binary the test skips, and fails under CI=true (test/harness/ci).
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/ci"
)

// Config is what the server scrapes and evaluates.
type Config struct {
	// Job is the scrape job's name, the `job` label of every series.
	Job string
	// Targets are host:port pairs serving /metrics over HTTP (loopback only).
	Targets []string
	// Rules are the rule files' contents, written to the server's directory.
	Rules []string
	// Interval is both the scrape and the evaluation interval (default 1 s).
	Interval time.Duration
}

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL, http://127.0.0.1:port.
	URL string

	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// Start runs Prometheus with cfg and waits until it is ready.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		ci.SkipOrFail(t, "promtest: prometheus is not installed (Debian's prometheus package; test/run.sh installs it)")
	}
	for _, tg := range cfg.Targets {
		host, _, err := net.SplitHostPort(tg)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Fatalf("promtest: target %q is not a loopback address", tg)
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	dir := t.TempDir()
	var ruleFiles []string
	for i, r := range cfg.Rules {
		p := filepath.Join(dir, fmt.Sprintf("rules%d.yaml", i))
		if err := os.WriteFile(p, []byte(r), 0o644); err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, p)
	}
	conf, _ := json.Marshal(map[string]any{ // JSON is YAML
		"global": map[string]any{"scrape_interval": cfg.Interval.String(), "evaluation_interval": cfg.Interval.String(),
			"scrape_timeout": cfg.Interval.String()},
		"rule_files": ruleFiles,
		"scrape_configs": []any{map[string]any{"job_name": cfg.Job,
			"static_configs": []any{map[string]any{"targets": cfg.Targets}}}},
	})
	confFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confFile, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{URL: "http://" + addr, out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--config.file="+confFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("promtest: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("promtest: prometheus exited before it was ready:\n%s", s.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("promtest: prometheus not ready within 30 s:\n%s", s.out.String())
		}
	}
}

func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Output returns what the server wrote.
func (s *Server) Output() string { return s.out.String() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var client = &http.Client{Timeout: 10 * time.Second}

// get reads an API answer's data into out, or returns the API's error.
func (s *Server) get(ctx context.Context, path string, q url.Values, out any) error {
	u := s.URL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		Error     string          `json:"error"`
		ErrorType string          `json:"errorType"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("promtest: %s: %d %s", path, res.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("promtest: %s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant query now. It returns the vector's samples (a scalar's
// answer is one sample without labels), or the error Prometheus gives (a query that
// does not parse, say).
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var v []Sample
		err := json.Unmarshal(data.Result, &v)
		return v, err
	case "scalar":
		var v [2]any
		err := json.Unmarshal(data.Result, &v)
		return []Sample{{Value: v}}, err
	}
	return nil, fmt.Errorf("promtest: %s answers a %s", expr, data.ResultType)
}

// Alert is one pending or firing alert.
type Alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"` // pending, firing
	ActiveAt time.Time         `json:"activeAt"`
}

// Alerts returns the alerts pending or firing now.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	err := s.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// RuleHealth returns each rule's health ("ok", "err", "unknown") and last error, by
// name: a rule that fails to evaluate shows here.
func (s *Server) RuleHealth(ctx context.Context) (map[string]string, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = strings.TrimSpace(r.Health + " " + r.LastError)
		}
	}
	return out, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
