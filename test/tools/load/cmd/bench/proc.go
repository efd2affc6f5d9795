package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dirgate/dirgate/test/tools/load"
)

// startTimeout bounds dirgate's start, building the binary not included, unless
// options.startTimeout gives more (a large export takes longer to load).
const startTimeout = time.Minute

// dirgateProc is dirgate running as a subprocess, with the redis-server it uses when
// this run started one.
type dirgateProc struct {
	// startTimeout, when longer than startTimeout, bounds the start instead.
	startTimeout time.Duration
	bin          string
	url          string
	cache        string
	cmd          *exec.Cmd
	exit         chan error
	redis        *exec.Cmd
}

// startDirgate builds (when bin is "") and starts dirgate on a free loopback port
// against the DC, with the tokens file and settings (after the tool's own), its files
// in the directory work (made here).
func startDirgate(ctx context.Context, work, bin string, settings map[string]string, o options, lc load.LDAPConfig, policyDir, tokens string) (*dirgateProc, error) {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	if bin == "" {
		bin = filepath.Join(work, "dirgate")
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dirgate")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build dirgate: %w", err)
		}
	}
	help, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	p := &dirgateProc{bin: bin, exit: make(chan error, 1), cache: "none (this dirgate build has no cache settings)", startTimeout: o.startTimeout}
	env := map[string]string{
		"DIRGATE_LISTEN": "127.0.0.1:0", "DIRGATE_UPSTREAM": "ldap", "DIRGATE_TOKENS_FILE": tokens,
		"DIRGATE_LDAP_URL": lc.URL, "DIRGATE_LDAP_BIND_DN": lc.BindDN, "DIRGATE_LDAP_PASSWORD_FILE": lc.PasswordFile,
		"DIRGATE_LDAP_BASE_DN": lc.BaseDN, "DIRGATE_LDAP_CA_FILE": lc.CAFile,
		"DIRGATE_DECISION_LOG": filepath.Join(work, "decisions.log"), "DIRGATE_POLICY_DIR": policyDir,
	}
	if bytes.Contains(help, []byte("metrics-listen")) {
		// A free port: the default one would collide when two dirgates run (-b-bin).
		env["DIRGATE_METRICS_LISTEN"] = "127.0.0.1:0"
	}
	if bytes.Contains(help, []byte("cache-ttl")) {
		// Entries outlive the run: an expiry in the middle would measure a directory
		// read, which the targets are not about.
		env["DIRGATE_CACHE_TTL"] = "1h"
		p.cache = "in process"
	}
	if bytes.Contains(help, []byte("redis-addr")) && o.redis != "off" {
		addr := o.redis
		if addr == "auto" {
			var err error
			if p.redis, addr, err = startRedis(ctx, work); err != nil {
				return nil, err
			}
		}
		env["DIRGATE_REDIS_ADDR"] = addr
		if bytes.Contains(help, []byte("secret-file")) {
			// Redis requires the secret that keys the HMACs of what dirgate keeps there;
			// one fixed value, so that every process of a run can share a Redis.
			secret := filepath.Join(work, "secret")
			if err := os.WriteFile(secret, []byte("the load bench's secret, never a deployment's\n"), 0o600); err != nil {
				p.stop()
				return nil, err
			}
			env["DIRGATE_SECRET_FILE"] = secret
		}
		p.cache = "redis " + addr + " with the in-process first level"
	}
	for k, v := range settings {
		env[k] = v
	}
	logPath := filepath.Join(work, "dirgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		p.stop()
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin)
	p.cmd.Env = environ(env)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		p.stop()
		return nil, fmt.Errorf("start dirgate: %w", err)
	}
	go func() { p.exit <- p.cmd.Wait() }()
	addr, err := p.waitServing(ctx, logPath, fixedAddr(env["DIRGATE_LISTEN"]))
	if err != nil {
		p.stop()
		return nil, err
	}
	p.url = "http://" + addr + "/restApi/api/directoryObjects/groupMembers"
	return p, nil
}

// processes are the processes whose CPU serves name's requests: dirgate, and the
// redis-server this run started for it.
func (p *dirgateProc) processes(name string) []load.Process {
	out := []load.Process{{Name: name, PID: p.cmd.Process.Pid}}
	if p.redis != nil {
		out = append(out, load.Process{Name: "redis", PID: p.redis.Process.Pid})
	}
	return out
}

// environ is this process's environment without any DIRGATE_ setting (a developer's
// DIRGATE_CONFIG must not change the run), plus env.
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIRGATE_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// fixedAddr returns listen when it names a port (a -dirgate-env DIRGATE_LISTEN), ""
// when dirgate picks one (port 0) and must say which in its log.
func fixedAddr(listen string) string {
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "0" {
		return listen
	}
	return ""
}

// waitServing reads dirgate's log until it says where it serves (unless addr is
// given: a log level above info does not say), then waits until /readyz answers 200.
func (p *dirgateProc) waitServing(ctx context.Context, logPath, addr string) (string, error) {
	wait := max(startTimeout, p.startTimeout)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.exit:
			p.exit <- err
			return "", fmt.Errorf("dirgate exited (%v): %s", err, tail(logPath))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if addr == "" {
			addr = servingAddr(logPath)
			continue
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("dirgate did not become ready within %s: %s", wait, tail(logPath))
}

// servingAddr finds the "dirgate serving" log line and returns its address.
func servingAddr(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "dirgate serving" {
			return line.Addr
		}
	}
	return ""
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stop ends dirgate gracefully (SIGTERM, then SIGKILL after its shutdown timeout)
// and the redis-server this run started.
func (p *dirgateProc) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exit:
		case <-time.After(40 * time.Second):
			p.cmd.Process.Kill()
			<-p.exit
		}
		p.cmd = nil
	}
	if p.redis != nil {
		p.redis.Process.Kill()
		p.redis.Wait()
		p.redis = nil
	}
}

// writeTokens gives each caller a random token and writes its hash to path.
func writeTokens(path string, callers []load.Caller) error {
	var b strings.Builder
	for i := range callers {
		raw := make([]byte, 16)
		rand.Read(raw)
		callers[i].Token = hex.EncodeToString(raw)
		sum := sha256.Sum256([]byte(callers[i].Token))
		fmt.Fprintf(&b, "- sha256: %x\n  subject: '%s'\n", sum, strings.ReplaceAll(callers[i].Subject, "'", "''"))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	return nil
}

// setTokens reads -tokens (name=token,...) into the callers.
func setTokens(callers []load.Caller, spec string) error {
	byName := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-tokens: %q is not name=token", kv)
		}
		byName[k] = v
	}
	for i, c := range callers {
		t, ok := byName[c.Name]
		if !ok {
			return fmt.Errorf("-tokens: no token for %s (%s)", c.Name, c.Subject)
		}
		callers[i].Token = t
	}
	return nil
}

// startRedis starts a redis-server without persistence on a free loopback port.
func startRedis(ctx context.Context, work string) (*exec.Cmd, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", work, "--logfile", filepath.Join(work, "redis.log"))
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start redis-server: %w", err)
	}
	for range 100 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return cmd, addr, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, "", fmt.Errorf("redis-server on %s did not answer: %s", addr, tail(filepath.Join(work, "redis.log")))
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run bench inside the dirgate module (or give -dirgate-bin)")
	}
	return filepath.Dir(mod), nil
}

// machineInfo is what docs/benchmarks.md records about the machine of a run.
type machineInfo struct {
	Date    string `json:"date"`
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu"`
	Kernel  string `json:"kernel"`
	Go      string `json:"go"`
	Samba   string `json:"samba"`
	Redis   string `json:"redis"`
	Commit  string `json:"commit"`
	LoadAvg string `json:"loadavgAtStart"`
	Cache   string `json:"cache"`
}

func machine() machineInfo {
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "unknown"
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return line
	}
	m := machineInfo{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Go: runtime.Version(),
		Samba: first("samba", "--version"), Redis: first("redis-server", "--version"),
		Commit: first("git", "describe", "--always", "--dirty"), CPU: "unknown", Cache: "dirgate not started by this run"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}

func (m machineInfo) print(w io.Writer) {
	fmt.Fprintf(w, "date %s, commit %s\n%d CPUs: %s, kernel %s, load average %s\n%s, %s, %s\ndirgate cache: %s\n\n",
		m.Date, m.Commit, m.CPUs, m.CPU, m.Kernel, m.LoadAvg, m.Go, m.Samba, m.Redis, m.Cache)
}
