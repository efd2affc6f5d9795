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
	var secret []byte
	var backend session.Backend
	switch {
	case m.Config.SecretFile != "":
		var err error
		if secret, err = session.ReadSecret(m.Config.SecretFile); err != nil {
			return nil, err
		}
	case m.Config.RedisAddr != "":
		// Shared records must be sealed under a key every replica knows and Redis
		// does not: without one, sign-in stays off.
		m.Logger.Warn("sign-in is off: with Redis it needs DIRGATE_SECRET_FILE (docs/auth.md)")
		return nil, nil
	default:
		secret = make([]byte, 32) // in process only: a key of this run
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("sign-in: %w", err)
		}
	}
	if m.Config.RedisAddr != "" {
		rcfg := m.Config.cacheConfig(m).Redis
		client, err := rcfg.NewRedisClient(sessionRedisTimeout)
		if err != nil {
			return nil, fmt.Errorf("sign-in: %w", err)
		}
		m.closers = append(m.closers, client.Close)
		backend = session.NewRedisBackend(client, m.Config.RedisKeyPrefix+"auth:", sessionRedisTimeout)
		m.signInFailures = session.NewRedisFailures(client, m.Config.RedisKeyPrefix+"auth:", sessionRedisTimeout)
	} else {
		backend = session.NewMemoryBackend(0)
	}
	store, err := session.New(session.Config{Backend: backend, Secret: secret, SessionTTL: m.Config.SessionTTL,
		TokenTTL: m.Config.TokenTTL, Logger: m.Logger})
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	if m.Config.TLSCertFile == "" && !isLoopback(m.Config.Listen) {
		m.Logger.Warn("sign-in is served over plain HTTP on a non-loopback address: passwords cross the network in clear text; set DIRGATE_TLS_CERT_FILE and DIRGATE_TLS_KEY_FILE",
			"listen", m.Config.Listen)
	}
	return &session.Service{Store: store, Checker: m.checker, Principals: tokens, Fallback: tokens,
		Policy: m.signInPolicy}, nil
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
