package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"time"

	"github.com/dirgate/dirgate/auth/session"
	"github.com/dirgate/dirgate/auth/tokenfile"
)

// demoPasswords are the embedded demo's sign-in passwords (docs/auth.md, "The
// demo"), printed at start-up: development only.
var demoPasswords = map[string]string{
	"dana.admin":    "Demo-Admin-1",
	"hugo.helpdesk": "Demo-Helpdesk-1",
}

// sessionRedisTimeout bounds each session-store command. It is longer than the
// cache's: a slow Redis makes the cache bypass itself, but a token cannot be
// checked anywhere else.
const sessionRedisTimeout = time.Second

// openSignIn builds the sign-in flow in front of the tokens file, or returns nil
// (tokens file only) when sign-in is off or cannot be served safely.
func (m *Main) openSignIn(ctx context.Context, tokens *tokenfile.File) (*session.Service, error) {
	if !m.Config.SignIn || m.checker == nil {
		return nil, nil
	}
	secret, err := m.readSecret()
	if err != nil {
		return nil, err
	}
	var backend session.Backend
	if secret == nil { // in process only (Validate requires the file with Redis): a key of this run
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("sign-in: %w", err)
		}
	}
	if m.Config.Redis.Configured() {
		client, err := m.redisConfig().Open(sessionRedisTimeout)
		if err != nil {
			return nil, fmt.Errorf("sign-in: %w", err)
		}
		m.closers = append(m.closers, client.Close)
		rb := session.NewRedisBackend(client, m.Config.Cache.KeyPrefix+"auth:", sessionRedisTimeout)
		rb.SetConfirmation(m.Config.RedisWait)
		backend = rb
		m.signInFailures = session.NewRedisFailures(client, m.Config.Cache.KeyPrefix+"auth:", sessionRedisTimeout, m.Config.Throttle.Window)
	} else {
		backend = session.NewMemoryBackend(0)
	}
	scfg := m.Config.Session
	scfg.Backend, scfg.Secret, scfg.Logger = backend, secret, m.Logger
	store, err := session.New(scfg)
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	if m.Config.Redis.Configured() {
		// Revocations Redis's replicas did not confirm: announced ones taken in, own
		// ones deleted again, at once after a failover (docs/auth.md).
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			store.Run(runCtx, m.Config.Cache.RetryInterval, m.redisHistory().Subscribe())
		}()
		m.closers = append(m.closers, func() error { cancel(); <-done; return nil })
	}
	if m.Config.TLSCertFile == "" && !isLoopback(m.Config.Listen) {
		m.Logger.Warn("sign-in is served over plain HTTP on a non-loopback address: passwords cross the network in clear text; set DIRGATE_TLS_CERT_FILE and DIRGATE_TLS_KEY_FILE",
			"listen", m.Config.Listen)
	}
	return &session.Service{Store: store, Checker: m.checker, Principals: tokens, Fallback: tokens,
		Policy: m.signInPolicy}, nil
}

// readSecret reads DIRGATE_SECRET_FILE once (nil when unset, which Validate allows
// only without Redis). With Redis it keys the HMACs of cache entries, the change
// feed, sessions and tokens.
func (m *Main) readSecret() ([]byte, error) {
	if m.secret != nil || m.Config.SecretFile == "" {
		return m.secret, nil
	}
	s, err := session.ReadSecret(m.Config.SecretFile)
	if err != nil {
		return nil, err
	}
	m.secret = s
	return s, nil
}

// isLoopback reports whether a listen address only accepts local connections; an
// empty host (all interfaces) does not.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
