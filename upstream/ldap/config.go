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
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
)

// Defaults for the zero values of Config.
const (
	DefaultPoolSize = 4
	// DefaultDialTimeout is what a DC that drops packets costs before the next DC is
	// tried; connect, TLS and bind take milliseconds on a healthy DC.
	DefaultDialTimeout    = 2 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	// DefaultAttemptTimeout is how long one attempt waits for a DC's first answer
	// before the next DC is asked too (reads) or the attempt is given up (writes,
	// sign-in). It is capped at RequestTimeout.
	DefaultAttemptTimeout    = 1500 * time.Millisecond
	DefaultHealthInterval    = 30 * time.Second
	DefaultDiscoveryInterval = 5 * time.Minute
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
// adapter: fill it, call Validate, then Open. Zero values take the defaults above.
// cmd/dirgate binds its ldap-* settings to these fields (docs/settings.md); Validate's
// errors name the fields (internal/fielderr), which it renders as the settings.
type Config struct {
	// URL names one or more DCs in order of preference, separated by commas and/or
	// whitespace (parseTargets, targets.go). Each is ldaps://host[:636] (TLS from the
	// first byte) or ldap://host[:389], which the adapter always upgrades with
	// StartTLS before binding: there is no clear-text mode, because a simple bind
	// would send the password in clear (and Samba refuses it anyway:
	// docs/directory.md, "Connections"). Each host also names its server for
	// certificate verification. Exactly one of URL and Domain is set.
	URL string
	// Domain is the AD domain whose DCs are discovered from DNS SRV records
	// (discoverTargets, targets.go) instead of listed in URL, e.g. corp.example.com.
	Domain string
	// DomainSuffixes are DNS suffixes besides Domain within which a discovered DC's
	// name may lie (a disjoint namespace); an SRV target outside Domain and these is
	// never used (discoverTargets, targets.go). Only with Domain.
	DomainSuffixes []string
	// Site is the AD site whose DCs are preferred (their SRV records are read
	// first); only with Domain.
	Site string
	// Resolver resolves the SRV records and the DCs' addresses; nil means
	// net.DefaultResolver. Tests point it at their own DNS server.
	Resolver *net.Resolver
	// BindDN is the service account's DN.
	BindDN string
	// PasswordFile holds the service account's password, read once at Open; one
	// trailing newline is ignored.
	PasswordFile string
	// BaseDN bounds everything the gateway sees: an object outside it is "not found",
	// and members outside it are left out of listings. It must lie in the domain
	// naming context of the server.
	BaseDN string
	// CAFile is a PEM bundle of the CAs that sign the server's certificate; empty means
	// the system roots. Verification is never skipped. Required with Domain: a DC
	// found in DNS is only as trusted as the CAs that may vouch for its name, and a
	// public CA vouches for any name its holder controls.
	CAFile string
	// PoolSize is the number of connections kept open and the most used at once.
	PoolSize int
	// DialTimeout bounds connecting, the TLS handshake and the bind to one DC.
	DialTimeout time.Duration
	// AttemptTimeout is how long one attempt on one DC waits for the DC's first
	// answer before a read is also sent to the next DC and a write or a sign-in is
	// given up on that DC. At most RequestTimeout.
	AttemptTimeout time.Duration
	// HealthInterval is how often DCs marked down, and preferred DCs not in use,
	// are checked again.
	HealthInterval time.Duration
	// DiscoveryInterval is how often the SRV records are read again; only used with
	// Domain.
	DiscoveryInterval time.Duration
	// RequestTimeout bounds every Directory call, retries included; the caller's
	// context deadline applies too, whichever comes first.
	RequestTimeout time.Duration
	// IdleTimeout discards a pooled connection unused for longer.
	IdleTimeout time.Duration
	// PageSize is the paged-results page size of subtree searches.
	PageSize int
	// UseInChain enables TransitiveMembers, one LDAP_MATCHING_RULE_IN_CHAIN search
	// per listing. Off by default: Samba evaluates the rule per object in scope
	// (seconds on a few thousand objects) and AD is known to time out on large
	// directories, while the member service's breadth-first expansion costs
	// milliseconds (docs/directory.md, "The in-chain matching rule"). Unlike the
	// expansion, the query also finds members reached through nested groups that
	// lie outside BaseDN.
	UseInChain bool

	// WriteOverlay is how long a membership write made through dirgate is laid over
	// listings read from another DC (overlay.go).
	WriteOverlay time.Duration
	// Journal shares the writes laid over listings with every replica (overlay.go;
	// cmd/dirgate passes writejournal's, in Redis); nil keeps them in this process
	// only.
	Journal WriteJournal

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
	if c.AttemptTimeout == 0 {
		// An explicit RequestTimeout below the default attempt timeout stays valid.
		c.AttemptTimeout = min(DefaultAttemptTimeout, c.RequestTimeout)
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.WriteOverlay == 0 {
		c.WriteOverlay = DefaultWriteOverlay
	}
	return c
}

// Validate reports every problem of the configuration at once, each a
// *fielderr.Error naming its field. It checks values only; Open reads the files.
// A zero value takes its default; a negative one is refused.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	switch {
	case c.URL == "" && c.Domain == "":
		bad("URL", "is required with the ldap upstream, unless {Domain} is set")
	case c.URL != "" && c.Domain != "":
		bad("Domain", "must not be set with {URL}: list the domain controllers or discover them, not both")
	case c.URL != "":
		if _, err := parseTargets(c.URL); err != nil {
			for _, e := range fielderr.List(err) {
				bad("URL", "%w", e)
			}
		}
	default:
		domain := strings.TrimSuffix(c.Domain, ".")
		bare := true
		if err := checkDNSName(domain); err != nil {
			bad("Domain", "domain %s: %w", shown(domain), err)
			bare = false
		}
		if c.Site != "" {
			if err := checkLabel(c.Site); err != nil {
				bad("Site", "site %s: %w", shown(c.Site), err)
				bare = false
			}
		}
		if err := checkDomain(domain, c.Site); bare && err != nil {
			bad("Domain", "%w", err) // the name queried is too long
		}
	}
	if c.Site != "" && c.Domain == "" {
		bad("Site", "is only used with {Domain}")
	}
	// Whoever answers the SRV query names the host that receives the service
	// account's password: only the operator's CAs may vouch for it.
	if c.Domain != "" && c.CAFile == "" {
		bad("CAFile", "is required with {Domain}: with the system roots, any host a DNS answer names that holds a public certificate for its name would receive the service account's password")
	}
	if len(c.DomainSuffixes) > 0 && c.Domain == "" {
		bad("DomainSuffixes", "is only used with {Domain}")
	}
	for _, s := range c.DomainSuffixes {
		if err := checkDomainSuffix(s); err != nil {
			bad("DomainSuffixes", "%w", err)
		}
	}
	for field, v := range map[string]string{"BindDN": c.BindDN, "BaseDN": c.BaseDN} {
		if v == "" {
			bad(field, "is required with the ldap upstream")
		} else if _, err := dirgate.ParseDN(v); err != nil {
			bad(field, "is not a DN: %w", err)
		}
	}
	if c.PasswordFile == "" {
		bad("PasswordFile", "is required with the ldap upstream")
	}
	for field, n := range map[string]int{"PoolSize": c.PoolSize, "PageSize": c.PageSize} {
		if n < 0 {
			bad(field, "must be positive")
		}
	}
	if c.PoolSize > maxPoolSize {
		bad("PoolSize", "must be between 1 and %d, got %d", maxPoolSize, c.PoolSize)
	}
	if c.PageSize > maxPageSize {
		bad("PageSize", "must be between 1 and %d, got %d", maxPageSize, c.PageSize)
	}
	for field, d := range map[string]time.Duration{"DialTimeout": c.DialTimeout, "RequestTimeout": c.RequestTimeout,
		"IdleTimeout": c.IdleTimeout, "AttemptTimeout": c.AttemptTimeout, "HealthInterval": c.HealthInterval,
		"DiscoveryInterval": c.DiscoveryInterval, "WriteOverlay": c.WriteOverlay} {
		if d < 0 {
			bad(field, "must be positive")
		}
	}
	// An attempt longer than the whole call would never be given up on.
	if rt := c.withDefaults().RequestTimeout; c.AttemptTimeout > rt && c.RequestTimeout >= 0 {
		bad("AttemptTimeout", "must not exceed {RequestTimeout}, %v", rt)
	}
	return fielderr.Join(errs...)
}

// checkDomainSuffix accepts an item of DomainSuffixes: a DNS name (letters, digits
// and inner hyphens, 253 characters at most), with an optional trailing dot.
func checkDomainSuffix(s string) error {
	if err := checkDNSName(strings.TrimSuffix(s, ".")); err != nil {
		return fmt.Errorf("suffix %s %w", shown(s), err)
	}
	return nil
}

// parseURL returns the address to dial and whether TLS starts at once (ldaps) or
// after StartTLS (ldap). URL's items follow it (parseTargets).
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
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", false, fmt.Errorf("port %s is not between 1 and 65535", shown(p))
		}
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
	roots, err := loadRoots(c.CAFile)
	if err != nil {
		return nil, err
	}
	targets, err := c.targets(ctx)
	if err != nil {
		return nil, err
	}
	newServer := func(t target) *server {
		tc := tlsConfigFor(roots, t.serverName)
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

// log is Logger, or slog.Default().
func (c Config) log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// resolverOf returns r, or the default resolver.
func resolverOf(r *net.Resolver) *net.Resolver {
	if r != nil {
		return r
	}
	return net.DefaultResolver
}

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

// tlsConfigFor verifies the server against roots (nil: the system roots) under
// serverName. Every DC's config may share one pool: it is read-only once built.
func tlsConfigFor(roots *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{ServerName: serverName, RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// loadRoots reads caFile's PEM certificates; an empty caFile gives nil, which
// crypto/tls takes as the system roots.
func loadRoots(caFile string) (*x509.CertPool, error) {
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
