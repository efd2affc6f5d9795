package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogLinesBatchedUntilClose: with DIRGATE_LOG_FLUSH set, a log line waits to be
// written with others, and Close (a graceful stop) writes it; with 0 it is written at
// once.
func TestLogLinesBatchedUntilClose(t *testing.T) {
	for _, tt := range []struct {
		flush  string
		atOnce bool
	}{{"1s", false}, {"0", true}} {
		cfg, err := LoadConfig(nil, env(map[string]string{"DIRGATE_LOG_FLUSH": tt.flush}), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr lockedBuffer
		m := NewMain(cfg, &stdout, &stderr)
		m.Logger.Info("first line")
		if got := strings.Contains(stderr.String(), "first line"); got != tt.atOnce {
			t.Errorf("DIRGATE_LOG_FLUSH=%s: line written at once: %v", tt.flush, got)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stderr.String(), "first line") || stdout.String() != "" {
			t.Errorf("DIRGATE_LOG_FLUSH=%s: after Close, stderr %q, stdout %q", tt.flush, stderr.String(), stdout.String())
		}
	}
}

// TestLogLinesWrittenWhenIdle: with the longest batch interval (1 s), the
// line of a request is written once that request, the only one in flight, has been
// logged: before its answer (small enough to wait in net/http's buffer until the
// handler returns) reaches the client.
func TestLogLinesWrittenWhenIdle(t *testing.T) {
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, env(map[string]string{"DIRGATE_LOG_FLUSH": "1s"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	m := NewMain(cfg, &stdout, &stderr)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	res, err := http.Get("http://" + m.Addr() + "/no-such-path")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d", res.StatusCode)
	}
	if !strings.Contains(stderr.String(), `"route":"notFound"`) {
		t.Fatalf("the request's log line was not written when the server went idle: %q", stderr.String())
	}
}
