package opaconfig_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/test/harness/opabundle"
)

// TestRefusesUnverifiedPolicy: a bundle without a signing block, one whose
// signing block lets unsigned delta bundles through, a bundle service or a
// decision-log service over plain HTTP, and one with allow_insecure_tls are each
// refused at start, before anything is downloaded: whoever answers such a service
// (or alters what it serves) would decide the policy, or read the credentials
// sent to it. Trust accepts them, each with a warning in the log.
func TestRefusesUnverifiedPolicy(t *testing.T) {
	s := newSigner(t)
	unsigned := opabundle.Tarball(t, policyFiles("yes"))
	tlsSrv := newBundleServer(t)
	tlsSrv.put("/bundles/authz.tar.gz", unsigned)
	plain := &bundleServer{bundles: map[string][]byte{"/bundles/authz.tar.gz": unsigned}}
	plain.Server = httptest.NewServer(http.HandlerFunc(plain.serve))
	t.Cleanup(plain.Close)

	plainCfg := func(signed bool) map[string]any {
		var sp *signer
		if signed {
			sp = &s
		}
		cfg := bundleConfig(t, plain.URL, sp, t.TempDir())
		cfg["services"].(map[string]any)["acme"] = map[string]any{"url": plain.URL}
		return cfg
	}
	deltas := bundleConfig(t, tlsSrv.URL, &s, t.TempDir())
	deltas["bundles"].(map[string]any)["authz"].(map[string]any)["signing"] = map[string]any{"keyid": "ci", "allow_unsigned_delta_bundles": true}
	plainLogs := logConfig(t, bundleConfig(t, tlsSrv.URL, &s, t.TempDir()), "http://127.0.0.1:1", 10)
	plainLogs["services"].(map[string]any)["logs"] = map[string]any{"url": "http://127.0.0.1:1", "credentials": map[string]any{"bearer": map[string]any{"token": "secret"}}}
	insecure := bundleConfig(t, tlsSrv.URL, &s, t.TempDir())
	insecure["services"].(map[string]any)["acme"].(map[string]any)["allow_insecure_tls"] = true

	for _, c := range []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{"unsigned over plain HTTP", plainCfg(false), []string{"no signing block", "DIRGATE_OPA_ALLOW_UNSIGNED_BUNDLES", "plain HTTP", "DIRGATE_OPA_ALLOW_PLAIN_HTTP"}},
		{"signed over plain HTTP", plainCfg(true), []string{"service acme is plain HTTP"}},
		{"unsigned over HTTPS", bundleConfig(t, tlsSrv.URL, nil, t.TempDir()), []string{"bundle authz has no signing block"}},
		{"unsigned deltas", deltas, []string{"allow_unsigned_delta_bundles"}},
		{"decision log over plain HTTP", plainLogs, []string{"service logs is plain HTTP"}},
		{"allow_insecure_tls", insecure, []string{"allow_insecure_tls"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark, tlsMark := plain.mark(), tlsSrv.mark()
			_, err := opaconfig.Open(context.Background(), opaconfig.Config{File: writeConfig(t, c.cfg), Logger: quietLogger(), StartWait: 5 * time.Second})
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Open = %v, want it refused, naming %q", err, w)
				}
			}
			if n := len(plain.since(mark)) + len(tlsSrv.since(tlsMark)); n > 0 {
				t.Errorf("%d requests to the bundle service before the refusal", n)
			}
		})
	}

	// Accepted when dirgate is told so, loudly.
	var log lockedBuffer
	rt, err := opaconfig.Open(context.Background(), opaconfig.Config{File: writeConfig(t, plainCfg(false)),
		Logger:    slog.New(slog.NewTextHandler(&log, nil)),
		StartWait: 30 * time.Second, Trust: opaconfig.Trust{Unsigned: true, PlainHTTP: true}})
	if err != nil {
		t.Fatalf("with Trust: %v", err)
	}
	defer rt.Close(context.Background())
	for _, w := range []string{"level=WARN msg=\"opa config: INSECURE: bundle authz has no signing block", "level=WARN msg=\"opa config: INSECURE: service acme is plain HTTP"} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, log.String())
		}
	}
}

// lockedBuffer is a log destination OPA's goroutines may write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBoundedServiceKeepsCredentials: every service's client is bounded
// (bound.go) without losing its credentials: the bundle service sees the bearer
// token of the file (inline or token_path), and refuses a wrong one.
func TestBoundedServiceKeepsCredentials(t *testing.T) {
	s := newSigner(t)
	b := build(t, &s, "r1", policyFiles("yes"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		seen = append(seen, auth)
		mu.Unlock()
		if auth != "Bearer inline" && auth != "Bearer from-file" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name   string
		bearer map[string]any
		ok     bool
	}{
		{"inline", map[string]any{"token": "inline"}, true},
		{"token_path", map[string]any{"token_path": tokenFile}, true},
		{"wrong", map[string]any{"token": "wrong"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := bundleConfig(t, srv.URL, &s, t.TempDir())
			cfg["services"].(map[string]any)["acme"].(map[string]any)["credentials"] = map[string]any{"bearer": c.bearer}
			rt, err := opaconfig.Open(context.Background(), opaconfig.Config{File: writeConfig(t, cfg), Logger: quietLogger(), StartWait: 5 * time.Second})
			if (err == nil) != c.ok {
				t.Fatalf("Open = %v, want success %v", err, c.ok)
			}
			if err == nil {
				rt.Close(context.Background())
			} else if !strings.Contains(err.Error(), "401") {
				t.Errorf("Open = %v, want the 401 named", err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "Bearer inline" {
		t.Errorf("the service saw Authorization %q", seen)
	}
}
