// Package child runs the real dirgate binary as a child process for the tests that
// watch it from outside (test/suite/faults, test/suite/hostile): it builds the binary
// once per test binary from ./cmd/dirgate, with the race detector when the tests run
// with -race (so those tests also hunt for data races in the program under test),
// starts it with the settings a test gives on a free loopback port, waits until it
// serves, keeps everything it writes, observes it through its own /metrics (on its
// metrics listener, DIRGATE_METRICS_LISTEN, also on a free loopback port) and
// /readyz, and stops it with SIGTERM when the test ends. Its client sends API
// requests and checks answers against docs/api.md's error shape; its settings helpers
// write tokens files and point the binary at the harness DC (test/harness/sambatest),
// directly or through a fault proxy (test/harness/faultproxy).
package child

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/ci"
)

// buildDir holds the binary; Main removes it.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Main runs a test package that uses Binary and removes the binary afterwards. Call
// it from TestMain: os.Exit(child.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	return code
}

// Binary returns the path of a dirgate binary built from this checkout.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "dirgate-child-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "dirgate")
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		args := []string{"build", "-o", buildBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/dirgate/dirgate/cmd/dirgate")
		out, err := exec.Command(goCmd, args...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("child: build dirgate: %v", buildErr)
	}
	return buildBin
}

// HelpText returns `dirgate --help`, which lists every setting the binary knows.
func HelpText(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(Binary(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("child: dirgate --help: %v\n%s", err, out)
	}
	return string(out)
}

// RequireSetting skips the test when the binary lacks an environment setting that a
// feature under test needs (a feature still being wired), and fails it under CI=true,
// where every feature the tests cover must be present.
func RequireSetting(t testing.TB, env string) {
	t.Helper()
	if strings.Contains(HelpText(t), "["+env+"]") {
		return
	}
	ci.SkipOrFail(t, fmt.Sprintf("child: dirgate does not know %s yet (dirgate --help)", env))
}

// Program is a running dirgate child process.
type Program struct {
	// Addr is the host:port it serves on; Base the API's URL.
	Addr, Base string
	// MetricsAddr is the host:port of its metrics listener ("" when a test turned
	// it off).
	MetricsAddr string
	// Pid is the child's process id.
	Pid int

	cmd    *exec.Cmd
	stdout *capture
	stderr *capture
	done   chan struct{}
	err    error // the exit status, once done is closed
}

// startTimeout bounds the wait for "dirgate serving": opening the LDAP upstream
// binds to the DC first, which takes a second on a loaded machine.
const startTimeout = 60 * time.Second

// Start runs dirgate with args (flags) and env (DIRGATE_*, OTEL_* variables; the
// test's own DIRGATE_* and OTEL_* variables are not inherited) and waits until it
// serves. It listens on a free loopback port, serves its metrics on another, and logs
// at info level unless args say otherwise (the log level must stay info or debug: the
// addresses are read from the "dirgate serving" line). The program is stopped when
// the test ends.
//
// dirgate refuses to start when the directory does not answer its first reads within
// the LDAP timeout; the harness DC is shared with other test runs and sometimes that
// slow, so such a start is tried again, twice at most, and said so in the log.
func Start(t testing.TB, env map[string]string, args ...string) *Program {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := start(t, env, args)
		if err == nil {
			return p
		}
		if attempt == 3 || !bytes.Contains(p.stderr.Bytes(), []byte("upstreamTimeout")) {
			t.Fatalf("child: %v\n%s", err, p.stderr.Bytes())
		}
		t.Logf("child: dirgate could not start because the directory was slow (attempt %d): %v", attempt, err)
	}
}

func start(t testing.TB, env map[string]string, args []string) (*Program, error) {
	t.Helper()
	bin := Binary(t)
	all := append([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "info", "--shutdown-timeout", "5s"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Env = childEnv(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	p := &Program{cmd: cmd, stdout: &capture{}, stderr: &capture{}, done: make(chan struct{})}
	cmd.Stdout = p.stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("child: start %s: %v", bin, err)
	}
	p.Pid = cmd.Process.Pid
	addr := make(chan servingLine, 1)
	stderrDone := make(chan struct{})
	go func() { p.readStderr(errPipe, addr); close(stderrDone) }()
	go func() { <-stderrDone; p.err = cmd.Wait(); close(p.done) }()
	select {
	case a := <-addr:
		p.Addr, p.Base = a.Addr, "http://"+a.Addr+"/restApi/api/directoryObjects/groupMembers"
		if a.MetricsAddr != "off" {
			p.MetricsAddr = a.MetricsAddr
		}
		t.Cleanup(func() { p.Stop() })
		return p, nil
	case <-p.done:
		return p, fmt.Errorf("dirgate exited before serving: %v", p.err)
	case <-time.After(startTimeout):
		p.Stop()
		return p, fmt.Errorf("dirgate did not serve within %v", startTimeout)
	}
}

// childEnv is the test's environment without DIRGATE_* and OTEL_* variables (a
// developer's shell may set them), plus env.
func childEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DIRGATE_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// servingLine is what the "dirgate serving" line says of where dirgate listens.
type servingLine struct {
	Addr        string
	MetricsAddr string `json:"metrics_addr"`
}

// readStderr keeps every line and reports the addresses of the "dirgate serving" line.
func (p *Program) readStderr(r io.Reader, addr chan<- servingLine) {
	br := bufio.NewReaderSize(r, 64<<10)
	found := false
	for {
		line, err := br.ReadBytes('\n')
		p.stderr.Write(line)
		if !found && bytes.Contains(line, []byte(`"dirgate serving"`)) {
			var l servingLine
			if json.Unmarshal(line, &l) == nil && l.Addr != "" {
				found = true
				addr <- l
			}
		}
		if err != nil {
			return
		}
	}
}

// Stop sends SIGTERM, as an orchestrator does, and waits for the exit; it returns
// the exit error (nil for a clean exit). It may be called more than once.
func (p *Program) Stop() error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("child: dirgate ignored SIGTERM for 30s; killed")
	}
	return p.err
}

// Output returns everything the program wrote so far to standard output and standard
// error. It fails the test if any of it was dropped (beyond maxCapture): a scan of
// the output must see all of it.
func (p *Program) Output(t testing.TB) (stdout, stderr []byte) {
	t.Helper()
	for _, c := range []*capture{p.stdout, p.stderr} {
		if n := c.droppedBytes(); n > 0 {
			t.Fatalf("child: %d bytes of dirgate's output were dropped beyond %d bytes", n, maxCapture)
		}
	}
	return p.stdout.Bytes(), p.stderr.Bytes()
}

// capture is a goroutine-safe, bounded output buffer.
type capture struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int
}

// maxCapture bounds what is kept of one stream; the runs here write a few MiB.
const maxCapture = 256 << 20

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len()+len(b) > maxCapture {
		c.dropped += len(b)
		return len(b), nil
	}
	return c.buf.Write(b)
}

func (c *capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

func (c *capture) droppedBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Metrics scrapes /metrics on the metrics listener and returns the value of every
// series, keyed by its name with labels as printed (go_goroutines,
// process_open_fds, ...).
func (p *Program) Metrics(ctx context.Context) (map[string]float64, error) {
	if p.MetricsAddr == "" {
		return nil, errors.New("scrape metrics: dirgate serves no metrics (metrics-listen off)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: status %d", res.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metricsClient opens a fresh connection per scrape, so that scraping never leaves
// an idle keep-alive connection (a goroutine and a descriptor in dirgate) behind to
// be counted as a leak.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// Resources are the leak indicators of the program, read from its /metrics.
type Resources struct {
	Goroutines int
	OpenFDs    int
	HeapAlloc  float64 // bytes
}

func (r Resources) String() string {
	return fmt.Sprintf("%d goroutines, %d fds, %.1f MiB heap", r.Goroutines, r.OpenFDs, r.HeapAlloc/(1<<20))
}

// Resources reads the leak indicators once.
func (p *Program) Resources(ctx context.Context) (Resources, error) {
	m, err := p.Metrics(ctx)
	if err != nil {
		return Resources{}, err
	}
	g, ok1 := m["go_goroutines"]
	f, ok2 := m["process_open_fds"]
	h, ok3 := m["go_memstats_heap_alloc_bytes"]
	if !ok1 || !ok2 || !ok3 {
		return Resources{}, errors.New("metrics lack go_goroutines, process_open_fds or go_memstats_heap_alloc_bytes")
	}
	return Resources{Goroutines: int(g), OpenFDs: int(f), HeapAlloc: h}, nil
}

// Ready returns /readyz's status and body.
func (p *Program) Ready(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	res, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}
