package ldap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	goldap "github.com/go-ldap/ldap/v3"
)

// conn is the part of *goldap.Conn the adapter uses. Tests put scripted fakes behind
// it; production uses *goldap.Conn itself.
type conn interface {
	SearchAsync(ctx context.Context, req *goldap.SearchRequest, bufferSize int) goldap.Response
	Modify(req *goldap.ModifyRequest) error
	IsClosing() bool
	Close() error
}

var _ conn = (*goldap.Conn)(nil)

// dialer opens bound connections.
type dialer struct {
	addr        string
	implicitTLS bool
	tls         *tls.Config
	bindDN      string
	password    string
	timeout     time.Duration
	resolver    *net.Resolver // nil: the default
	// redact leaves bindDN out of errors: a user's sign-in bind must not write
	// the account's name into a log (a 5xx logs its error).
	redact bool
}

// dial connects, secures and binds a connection within d.timeout and ctx. go-ldap's
// StartTLS handshake and Bind take no context, so the raw socket carries the deadline
// instead: when ctx ends, every pending read and write fails at once.
func (d *dialer) dial(ctx context.Context) (conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	nd := net.Dialer{Resolver: d.resolver}
	raw, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("dial %s: %w", d.addr, &notSentError{err})
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	c, err := d.setup(ctx, raw)
	if stop() && err == nil {
		return c, nil
	}
	// Failed, or ctx ended while we worked and the socket's deadline has passed.
	if c != nil {
		c.Close()
	}
	_ = raw.Close()
	if ctx.Err() != nil {
		// The I/O error is only the deadline we set: report why it was set.
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return nil, fmt.Errorf("dial %s: %w", d.addr, err)
}

func (d *dialer) setup(ctx context.Context, raw net.Conn) (*goldap.Conn, error) {
	var nc net.Conn = raw
	if d.implicitTLS {
		tc := tls.Client(raw, d.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, &notSentError{goldap.NewError(goldap.ErrorNetwork, fmt.Errorf("TLS handshake: %w", err))}
		}
		nc = tc
	}
	c := goldap.NewConn(nc, d.implicitTLS)
	c.Start()
	if !d.implicitTLS {
		if err := c.StartTLS(d.tls); err != nil {
			return c, &notSentError{fmt.Errorf("StartTLS: %w", err)}
		}
	}
	if _, err := c.SimpleBind(&goldap.SimpleBindRequest{Username: d.bindDN, Password: d.password}); err != nil {
		if d.redact {
			return c, fmt.Errorf("bind: %w", err)
		}
		return c, fmt.Errorf("bind as %s: %w", d.bindDN, err)
	}
	return c, nil
}

// notSentError is a dial's failure before its bind request was sent: connecting,
// the TLS handshake or StartTLS. The server never saw the credentials.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// modify runs a Modify under ctx. go-ldap's Modify takes no context, so it runs in a
// goroutine; when ctx ends first the caller discards (closes) the connection, which
// ends the goroutine. The write may still have reached the server.
func modify(ctx context.Context, c conn, req *goldap.ModifyRequest) error {
	done := make(chan error, 1)
	go func() { done <- c.Modify(req) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errConnClosed is returned when a search ends without an error on a connection
// that closed under it: go-ldap's SearchAsync then reports nothing at all.
var errConnClosed = goldap.NewError(goldap.ErrorNetwork, errors.New("ldap: connection closed"))
