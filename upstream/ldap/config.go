// Package ldap is a dirgate.Directory over LDAP for Active Directory and Samba AD,
// built on go-ldap. It keeps a small pool of connections bound as a service account,
// resolves identifiers with AD's <GUID=…>/<SID=…> base DNs, lists members with one
// Attribute Scoped Query where the server supports it, and maps every LDAP result
// code to a dirgate error code in one table (errors.go). go-ldap types never leave
// the package.
//
// The facts this package relies on were measured against Samba 4.17 and are recorded
// in docs/directory.md, beside what AD documents; comments cite its sections by title.
package ldap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
)

// Defaults for the zero values of Config.
const (
	DefaultPoolSize       = 4
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	// DefaultIdleTimeout stays below AD's MaxConnIdleTime (900 s), so the pool drops
	// a connection before the server does (docs/directory.md, "Connections").
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultPageSize is AD's MaxPageSize: a larger page is cut to it anyway.
	DefaultPageSize = 1000
)

// Bounds that Validate enforces; beyond them a setting is a typo, not a choice.
const (
	maxPoolSize = 64
	maxPageSize = 100000
)

// Config describes the directory and the service account. It is the factory of the
// adapter: fill it (the env names are those cmd/dirgate reads), call Validate, then
// Open. Zero values take the defaults above.
type Config struct {
	// URL is ldaps://host[:636] (TLS from the first byte) or ldap://host[:389], which
	// the adapter always upgrades with StartTLS before binding: there is no
	// clear-text mode, because a simple bind would send the password in clear (and
	// Samba refuses it anyway: docs/directory.md, "Connections"). The host also names
	// the server for certificate verification. DIRGATE_LDAP_URL.
	URL string
	// BindDN is the service account's DN. DIRGATE_LDAP_BIND_DN.
	BindDN string
	// PasswordFile holds the service account's password, read once at Open; one
	// trailing newline is ignored. DIRGATE_LDAP_PASSWORD_FILE.
	PasswordFile string
	// BaseDN bounds everything the gateway sees: an object outside it is "not found",
	// and members outside it are left out of listings. It must lie in the domain
	// naming context of the server. DIRGATE_LDAP_BASE_DN.
	BaseDN string
	// CAFile is a PEM bundle of the CAs that sign the server's certificate; empty means
	// the system roots. Verification is never skipped. DIRGATE_LDAP_CA_FILE.
	CAFile string
	// PoolSize is the number of connections kept open and the most used at once.
	// DIRGATE_LDAP_POOL_SIZE.
	PoolSize int
	// DialTimeout bounds connecting, the TLS handshake and the bind.
	// DIRGATE_LDAP_DIAL_TIMEOUT.
	DialTimeout time.Duration
	// RequestTimeout bounds every Directory call, retries included; the caller's
	// context deadline applies too, whichever comes first. DIRGATE_LDAP_TIMEOUT.
	RequestTimeout time.Duration
	// IdleTimeout discards a pooled connection unused for longer.
	// DIRGATE_LDAP_IDLE_TIMEOUT.
	IdleTimeout time.Duration
	// PageSize is the paged-results page size of subtree searches.
	// DIRGATE_LDAP_PAGE_SIZE.
	PageSize int
	// UseInChain enables TransitiveMembers, one LDAP_MATCHING_RULE_IN_CHAIN search
	// per listing. Off by default: Samba evaluates the rule per object in scope
	// (seconds on a few thousand objects) and AD is known to time out on large
	// directories, while the member service's breadth-first expansion costs
	// milliseconds (docs/directory.md, "The in-chain matching rule").
	// DIRGATE_LDAP_IN_CHAIN. Unlike the expansion, the query also finds members
	// reached through nested groups that lie outside BaseDN.
	UseInChain bool

	// Domain, Site, Resolver, AttemptTimeout, HealthInterval, DiscoveryInterval:
	// placeholders until the DC-list branch lands.
	Domain            string
	Site              string
	Resolver          *net.Resolver
	AttemptTimeout    time.Duration
	HealthInterval    time.Duration
	DiscoveryInterval time.Duration

	// WriteOverlay is how long a membership write made through dirgate is laid over
	// listings read from another DC (overlay.go). DIRGATE_LDAP_WRITE_OVERLAY.
	WriteOverlay time.Duration

	// Breaker, when set, gives each server its own circuit breaker (cmd/dirgate
	// passes upstream/breaker's), named by the server's URL: a DC that fails is cut
	// off while the others keep serving.
	Breaker func(server string) Breaker
	// Logger receives failover events (a DC marked down, up again, DNS discovery);
	// nil is slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 1500 * time.Millisecond
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = 30 * time.Second
	}
	if c.WriteOverlay == 0 {
		c.WriteOverlay = DefaultWriteOverlay
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 5 * time.Minute
	}
	return c
}

// Validate reports every problem of the configuration at once. It checks values
// only; Open reads the files.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL == "" {
		add("ldap: URL (DIRGATE_LDAP_URL) is required")
	} else if _, _, err := parseURL(c.URL); err != nil {
		add("ldap: URL (DIRGATE_LDAP_URL): %w", err)
	}
	for _, f := range []struct{ name, env, val string }{
		{"BindDN", "DIRGATE_LDAP_BIND_DN", c.BindDN},
		{"BaseDN", "DIRGATE_LDAP_BASE_DN", c.BaseDN},
	} {
		if f.val == "" {
			add("ldap: %s (%s) is required", f.name, f.env)
		} else if _, err := dirgate.ParseDN(f.val); err != nil {
			add("ldap: %s (%s) is not a DN: %w", f.name, f.env, err)
		}
	}
	if c.PasswordFile == "" {
		add("ldap: PasswordFile (DIRGATE_LDAP_PASSWORD_FILE) is required")
	}
	if c.PoolSize < 0 || c.PoolSize > maxPoolSize {
		add("ldap: PoolSize (DIRGATE_LDAP_POOL_SIZE) must be between 1 and %d, got %d", maxPoolSize, c.PoolSize)
	}
	if c.PageSize < 0 || c.PageSize > maxPageSize {
		add("ldap: PageSize (DIRGATE_LDAP_PAGE_SIZE) must be between 1 and %d, got %d", maxPageSize, c.PageSize)
	}
	for _, d := range []struct {
		name, env string
		val       time.Duration
	}{
		{"DialTimeout", "DIRGATE_LDAP_DIAL_TIMEOUT", c.DialTimeout},
		{"RequestTimeout", "DIRGATE_LDAP_TIMEOUT", c.RequestTimeout},
		{"IdleTimeout", "DIRGATE_LDAP_IDLE_TIMEOUT", c.IdleTimeout},
	} {
		if d.val < 0 {
			add("ldap: %s (%s) must not be negative, got %v", d.name, d.env, d.val)
		}
	}
	return errors.Join(errs...)
}

// parseURL returns the address to dial and whether TLS starts at once (ldaps) or
// after StartTLS (ldap).
func parseURL(s string) (addr string, implicitTLS bool, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", false, fmt.Errorf("parse: %w", err)
	}
	var port string
	switch strings.ToLower(u.Scheme) {
	case "ldaps":
		implicitTLS, port = true, "636"
	case "ldap":
		port = "389"
	default:
		return "", false, fmt.Errorf("scheme %q is neither ldaps nor ldap", u.Scheme)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false, fmt.Errorf("must be scheme://host[:port] only")
	}
	host := u.Hostname()
	if host == "" {
		return "", false, fmt.Errorf("has no host")
	}
	if p := u.Port(); p != "" {
		port = p
	}
	return net.JoinHostPort(host, port), implicitTLS, nil
}

// Open validates c, reads the password and CA files, finds the servers (the URL list,
// or DNS SRV for Domain), connects and binds once to the first that answers (so a
// wrong password or no reachable server fails here, not on the first request), reads
// what the directory supports from its rootDSE, and starts the background health
// checks.
func (c Config) Open(ctx context.Context) (*Directory, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	password, err := readPassword(c.PasswordFile)
	if err != nil {
		return nil, err
	}
	roots, err := readRoots(c.CAFile)
	if err != nil {
		return nil, err
	}
	var targets []target
	if c.Domain != "" {
		targets, err = discoverTargets(ctx, resolverOf(c.Resolver), c.Domain, c.Site)
		if err != nil {
			return nil, fmt.Errorf("ldap: discover the domain controllers of %s: %w", c.Domain, err)
		}
	} else if targets, err = parseTargets(c.URL); err != nil {
		return nil, fmt.Errorf("ldap: URL (DIRGATE_LDAP_URL): %w", err)
	}
	newServer := func(t target) *server {
		tc := &tls.Config{ServerName: t.serverName, MinVersion: tls.VersionTLS12, RootCAs: roots}
		dl := &dialer{addr: t.addr, implicitTLS: t.implicitTLS, tls: tc, bindDN: c.BindDN, password: password,
			timeout: c.DialTimeout, resolver: c.Resolver}
		s := &server{t: t, pool: newPool(c.PoolSize, c.IdleTimeout, dl.dial),
			user: dialer{addr: t.addr, implicitTLS: t.implicitTLS, tls: tc, timeout: c.DialTimeout, resolver: c.Resolver, redact: true}}
		if c.Breaker != nil {
			s.brk = c.Breaker(t.url)
		}
		s.next = time.Now().Add(c.HealthInterval)
		return s
	}
	base := dirgate.MustParseDN(c.BaseDN) // validated above
	d := newDirectory(c, base, targets, newServer)
	if err := d.discover(ctx); err != nil {
		d.Close()
		return nil, err
	}
	d.start()
	return d, nil
}

// resolverOf returns r, or the default resolver.
func resolverOf(r *net.Resolver) *net.Resolver {
	if r != nil {
		return r
	}
	return net.DefaultResolver
}

func (d *Directory) resolver() srvResolver { return resolverOf(d.cfg.Resolver) }

func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("ldap: read password file: %w", err)
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		// An empty password turns a simple bind into an unauthenticated one.
		return "", fmt.Errorf("ldap: password file %s is empty", path)
	}
	return p, nil
}

// readRoots reads the CAs that sign the servers' certificates; nil (no file) means
// the system roots. Verification is never skipped.
func readRoots(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ldap: read CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ldap: CA file %s holds no PEM certificate", caFile)
	}
	return roots, nil
}
