package ldap

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// silentServer accepts connections on 127.0.0.1 and never answers, like a DC that
// hangs; go-ldap's StartTLS and Bind take no context, so only the socket deadline
// the dialer sets can end them.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestDialEndsWithContext(t *testing.T) {
	addr := silentServer(t)
	tests := []struct {
		name        string
		implicitTLS bool
		timeout     time.Duration // the dial timeout
		cancel      bool          // the caller cancels instead
		want        error
		wantCode    string
	}{
		// The TLS handshake of ldaps:// never completes.
		{"ldaps handshake", true, 50 * time.Millisecond, false, context.DeadlineExceeded, dirgate.ETIMEOUT},
		// The StartTLS extended operation never gets its answer.
		{"starttls", false, 50 * time.Millisecond, false, context.DeadlineExceeded, dirgate.ETIMEOUT},
		// The caller goes away during the handshake.
		{"canceled", true, time.Hour, true, context.Canceled, dirgate.ECANCELED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &dialer{addr: addr, implicitTLS: tt.implicitTLS, tls: &tls.Config{ServerName: "127.0.0.1"},
				bindDN: "CN=x", password: "p", timeout: tt.timeout}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			c, err := d.dial(ctx)
			if c != nil || !errors.Is(err, tt.want) {
				t.Fatalf("dial = %v, %v; want %v", c, err, tt.want)
			}
			if code := dirgate.ErrorCode(wrap("dial", err)); code != tt.wantCode {
				t.Errorf("code = %s, want %s", code, tt.wantCode)
			}
		})
	}
}

// TestDialRefused: nothing listening is an upstream failure, not a timeout.
func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	d := &dialer{addr: addr, implicitTLS: true, tls: &tls.Config{}, timeout: time.Second}
	_, err = d.dial(context.Background())
	if err == nil || dirgate.ErrorCode(wrap("dial", err)) != dirgate.EUPSTREAM || !isNetworkError(err) {
		t.Errorf("dial to a closed port: %v", err)
	}
}
