// Package redistest starts real redis-server processes for tests: a single server
// (plain, or TLS-only with certificates made for the test), a replica of one, a
// Sentinel, or a Redis Cluster of three primaries (with or without a replica each),
// each on free loopback ports with its state in a temporary directory, stopped when
// the test ends. For failover tests it also pauses and resumes a server (SIGSTOP,
// SIGCONT), reads its INFO, and waits for a Sentinel or a Cluster to promote a
// replica. Tests never touch a Redis they
// did not start (such as one on the default port 6379).
//
// When redis-server (or, for a cluster, redis-cli) is not installed, the test is
// skipped on a developer machine and fails when CI=true: CI must run these tests
// (test/run.sh installs the packages).
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/ci"
)

// startTimeout bounds how long a server may take to accept connections, and a
// cluster to agree on its slots. Both take well under a second here.
const startTimeout = 20 * time.Second

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}

	tlsFiles *TLSFiles   // TLS only, with these files
	tlsConf  *tls.Config // how Do connects to a TLS server
	sentinel string      // the primary a Sentinel monitors, as "name host port"
	sentOpts SentinelOptions
}

// require finds a command, or skips (fails in CI) the test without it.
func require(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	ci.SkipOrFail(t, fmt.Sprintf("redistest: %s is not installed (apt-get install redis-server redis-tools; test/run.sh installs them)", name))
	return ""
}

// Start starts a single redis-server without persistence. extra are further
// redis-server arguments ("--requirepass", "secret").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return newServer(t, "", extra, nil)
}

// StartTLS starts a server that accepts only TLS on its port, with files from
// NewTLSFiles. Clients need not present a certificate.
func StartTLS(t testing.TB, files TLSFiles, extra ...string) *Server {
	t.Helper()
	return newServer(t, "", extra, func(s *Server) {
		s.tlsFiles = &files
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(files.CA)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("redistest: CA file %s: %v", files.CA, err)
		}
		s.tlsConf = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	})
}

// StartSentinel starts a Sentinel that monitors primary under name, with a quorum
// of one.
func StartSentinel(t testing.TB, primary *Server, name string) *Server {
	t.Helper()
	return newServer(t, "", nil, func(s *Server) {
		s.sentinel = name + " 127.0.0.1 " + strconv.Itoa(primary.port)
	})
}

func newServer(t testing.TB, dir string, extra []string, setup func(*Server)) *Server {
	t.Helper()
	bin := require(t, "redis-server")
	if dir == "" {
		dir = t.TempDir()
	}
	var lastErr error
	for range 5 { // a free port may be taken between choosing it and binding it
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{t: t, bin: bin, dir: dir, port: port, args: extra}
		if setup != nil {
			setup(s)
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if !errors.Is(lastErr, errExited) {
			break // a server that started but does not answer will not on another port
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// freePort returns a loopback port that is free, with port+10000 (a cluster node's
// bus port) free as well.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("choose a port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair found")
}

func (s *Server) start() error {
	logfile := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port))
	var args []string
	switch {
	case s.sentinel != "":
		// A Sentinel rewrites its configuration file, so it gets one of its own.
		conf := filepath.Join(s.dir, fmt.Sprintf("sentinel-%d.conf", s.port))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s %d\n", s.port, s.dir, logfile, s.sentinel, s.sentOpts.quorum())
		text += s.sentOpts.config(strings.Fields(s.sentinel)[0])
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return err
		}
		args = []string{conf, "--sentinel"}
	default:
		args = []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
			"--logfile", logfile, "--loglevel", "warning",
			// A replica's first synchronisation starts at once, not after 5 s.
			"--repl-diskless-sync-delay", "0"}
		if s.tlsFiles != nil {
			args[1] = "0"
			args = append(args, "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", s.tlsFiles.Cert,
				"--tls-key-file", s.tlsFiles.Key, "--tls-ca-cert-file", s.tlsFiles.CA, "--tls-auth-clients", "no")
		}
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	// The server dies with the test binary even if cleanups never run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(startTimeout)
	for {
		// Any reply means the server is up (NOAUTH included, when it wants a password).
		var reply ReplyError
		if _, err := s.Do("PING"); err == nil || errors.As(err, &reply) {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logfile)
			return fmt.Errorf("%w: port %d: %s", errExited, s.port, strings.TrimSpace(string(log)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v", s.port, startTimeout)
		}
	}
}

// errExited: the server stopped while starting, usually because its port was taken.
var errExited = errors.New("redis-server exited")

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Stop kills the server at once, as a crash would; its data is gone. It may be
// called more than once.
func (s *Server) Stop() {
	if s.cmd != nil {
		s.kill()
		s.cmd = nil
	}
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart starts the server again on the same port, empty. It fails the test if
// the port cannot be bound again.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Do sends one command over a fresh connection and returns the reply as text:
// simple strings, integers and bulk strings as their value, arrays one element per
// line. An error reply is returned as an error.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.Addr(), s.tlsConf, args...)
}

func do(addr string, tlsConf *tls.Config, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var c net.Conn
	var err error
	if tlsConf != nil {
		c, err = (&tls.Dialer{Config: tlsConf}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", ReplyError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "", nil // nil bulk string
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// ReplyError is an error reply from the server ("-ERR ...").
type ReplyError string

func (e ReplyError) Error() string { return string(e) }
