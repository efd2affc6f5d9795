package ldap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// target is one domain controller to connect to.
type target struct {
	url         string // canonical form, for logs/metrics labels: scheme://host:port
	addr        string // host:port to dial
	implicitTLS bool   // ldaps (true) or ldap+StartTLS (false)
	serverName  string // name the certificate is verified against (host, or SRV target without trailing dot)
}

// Bounds of the DC list. An AD domain rarely has more than a handful of DCs in one
// site; beyond these a setting is a mistake (or a hostile DNS answer), and every
// target costs a pool and a health check.
const (
	maxTargets       = 32
	maxURLListLength = 8192
	// maxShownLength bounds an offending value quoted in an error, so that a
	// pasted file or a binary value does not flood the log.
	maxShownLength = 80
)

// parseTargets reads Config.URL: one or more URLs in order of preference,
// separated by commas and/or whitespace (any mix, repeated separators ignored), each
// following parseURL's rules with a host that is a host name or an IP literal
// without a zone. It refuses an empty list, duplicates (the same address, the host
// compared case-insensitively) and lists beyond maxTargets URLs or
// maxURLListLength bytes. Every bad item is reported, each by position and value.
func parseTargets(s string) ([]target, error) {
	if len(s) > maxURLListLength {
		return nil, fmt.Errorf("is %d bytes long, more than %d", len(s), maxURLListLength)
	}
	items := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(items) == 0 {
		return nil, errors.New("names no URL")
	}
	if len(items) > maxTargets {
		return nil, fmt.Errorf("names %d URLs, more than %d", len(items), maxTargets)
	}
	var (
		out  []target
		errs []error
		seen = make(map[string]int, len(items)) // addr -> position
	)
	for i, item := range items {
		t, err := parseTarget(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("item %d of %d (%s): %w", i+1, len(items), shown(item), err))
			continue
		}
		key := strings.Replace(t.addr, ".:", ":", 1) // dc. is dc
		if j, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("item %d of %d (%s): the same server as item %d", i+1, len(items), shown(item), j))
			continue
		}
		seen[key] = i + 1
		out = append(out, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parseTarget turns one URL into a target. The host is lower-cased (DNS names and
// certificate names compare case-insensitively) and an IP literal is written in
// its canonical form, so that two spellings of one server are seen as duplicates.
func parseTarget(s string) (target, error) {
	addr, implicitTLS, err := parseURL(s)
	if err != nil {
		return target{}, err
	}
	host, port, _ := net.SplitHostPort(addr) // parseURL joined them
	host = strings.ToLower(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			// crypto/tls takes a zoned address for a host name, so no
			// certificate could ever match it.
			return target{}, errors.New("an IPv6 zone cannot be verified against a certificate")
		}
		host = ip.String()
	} else if err := checkHostName(host); err != nil {
		return target{}, fmt.Errorf("host %s %w", shown(host), err)
	}
	return newTarget(host, port, implicitTLS), nil
}

func newTarget(host, port string, implicitTLS bool) target {
	scheme := "ldap"
	if implicitTLS {
		scheme = "ldaps"
	}
	addr := net.JoinHostPort(host, port)
	return target{url: scheme + "://" + addr, addr: addr, implicitTLS: implicitTLS, serverName: host}
}

// shown quotes a value for an error message, cut to maxShownLength bytes.
func shown(s string) string {
	if len(s) > maxShownLength {
		return strconv.Quote(s[:maxShownLength]) + "…"
	}
	return strconv.Quote(s)
}

// srvResolver is the part of *net.Resolver that discovery uses; tests fake it.
type srvResolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// discoverTargets finds the domain's DCs as Windows' DC locator does: the site's
// records (_ldap._tcp.<site>._sites.dc._msdcs.<domain>) first when site is set,
// then the domain-wide ones (_ldap._tcp.dc._msdcs.<domain>) not already listed.
// Within each answer the order is the resolver's: *net.Resolver sorts by priority
// and shuffles by weight (RFC 2782). Each DC is reached with StartTLS on the
// record's port, as AD and Samba publish port 389 and no LDAPS record, and its
// certificate is verified against the record's target name.
//
// A failing site lookup is not an error while the domain-wide one answers: the
// site may have no DCs of its own (or not exist). A failing domain-wide lookup is
// not one either when the site's records gave DCs. At most maxTargets DCs are
// returned; records of target "." (RFC 2782: no such service), of port 0 or of a
// target that is not a host name are skipped.
//
// A target must lie within the domain or one of suffixes (withinSuffix): whoever
// answers the SRV query chooses the host that receives the service account's
// password and every sign-in's, and a certificate verifies only that the host is
// the one named, not that it is a DC. A target outside is skipped and logged
// (cut: the name is the DNS answer's choice); with none left, discovery fails as
// with no records.
func discoverTargets(ctx context.Context, r srvResolver, domain, site string, suffixes []string, log *slog.Logger) ([]target, error) {
	domain = strings.TrimSuffix(domain, ".")
	if err := checkDomain(domain, site); err != nil {
		return nil, fmt.Errorf("ldap: discover domain controllers: %w", err)
	}
	allowed := append([]string{domain}, suffixes...)
	var (
		out          []target
		seen         = map[string]bool{}
		skipped      int
		outside      int
		firstOutside string
	)
	add := func(records []*net.SRV) {
		for _, rec := range records {
			if len(out) == maxTargets {
				return
			}
			if rec == nil || rec.Target == "." {
				continue
			}
			host := strings.ToLower(strings.TrimSuffix(rec.Target, "."))
			if rec.Port == 0 || checkDNSName(host) != nil {
				skipped++
				continue
			}
			if !withinSuffix(host, allowed) {
				if outside == 0 {
					firstOutside = host
				}
				outside++
				continue
			}
			t := newTarget(host, strconv.Itoa(int(rec.Port)), false)
			if !seen[t.addr] {
				seen[t.addr] = true
				out = append(out, t)
			}
		}
	}
	var siteErr error
	if site != "" {
		// LookupSRV returns the records it could read beside an error about the
		// malformed ones; those it returns are usable.
		_, records, err := r.LookupSRV(ctx, "ldap", "tcp", site+"._sites.dc._msdcs."+domain)
		if err != nil {
			siteErr = fmt.Errorf("site %s: %w", site, err)
		}
		add(records)
	}
	_, records, domainErr := r.LookupSRV(ctx, "ldap", "tcp", "dc._msdcs."+domain)
	add(records)
	if outside > 0 && log != nil {
		// The name passed checkDNSName (letters, digits, hyphens, dots); it is cut
		// all the same, as every value an answer chooses.
		log.Warn("ldap: DNS SRV records name domain controllers outside the domain and its allowed suffixes; they are not used",
			"domain", domain, "skipped", outside, "first", firstOutside[:min(len(firstOutside), maxShownLength)])
	}
	if len(out) > 0 {
		return out, nil
	}
	if domainErr != nil && outside == 0 {
		return nil, fmt.Errorf("ldap: discover domain controllers of %s: %w", domain, errors.Join(siteErr, domainErr))
	}
	none := errors.New("DNS lists none")
	switch {
	case outside > 0:
		none = fmt.Errorf("DNS lists none usable (%d records name a host outside %s and the domain suffixes, the first %s; %d other records skipped: port 0 or not a host name)",
			outside, domain, shown(firstOutside), skipped)
	case skipped > 0:
		none = fmt.Errorf("DNS lists none usable (%d records skipped: port 0 or not a host name)", skipped)
	}
	return nil, fmt.Errorf("ldap: discover domain controllers of %s: %w", domain, errors.Join(none, siteErr, domainErr))
}

// withinSuffix reports whether host (lower-case, without a trailing dot) is one of
// suffixes or lies below one, label by label: dc1.corp.example.com is within
// corp.example.com, xcorp.example.com is not. Suffixes compare case-insensitively
// and may end with a dot.
func withinSuffix(host string, suffixes []string) bool {
	for _, s := range suffixes {
		s = strings.ToLower(strings.TrimSuffix(s, "."))
		if s != "" && (host == s || strings.HasSuffix(host, "."+s)) {
			return true
		}
	}
	return false
}

// checkDomain validates the domain and site so that only plain DNS names reach the
// resolver: the domain one or more labels, the site one label, and the longest
// name queried within DNS's 253 characters.
func checkDomain(domain, site string) error {
	var errs []error
	if err := checkDNSName(domain); err != nil {
		errs = append(errs, fmt.Errorf("domain %s: %w", shown(domain), err))
	}
	if site != "" {
		if err := checkLabel(site); err != nil {
			errs = append(errs, fmt.Errorf("site %s: %w", shown(site), err))
		}
	}
	longest := "_ldap._tcp.dc._msdcs." + domain
	if site != "" {
		longest = "_ldap._tcp." + site + "._sites.dc._msdcs." + domain
	}
	if len(errs) == 0 && len(longest) > 253 {
		errs = append(errs, fmt.Errorf("the name queried, %s, is longer than 253 characters", shown(longest)))
	}
	return errors.Join(errs...)
}

// checkDNSName accepts a host name without a trailing dot: labels of letters,
// digits and inner hyphens (RFC 1123), 253 characters at most.
func checkDNSName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > 253 {
		return fmt.Errorf("is %d characters long, more than 253", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if err := checkLabel(label); err != nil {
			return err
		}
	}
	return nil
}

// checkHostName accepts the host of a URL that is not an IP literal: labels of
// letters, digits, hyphens and underscores (which some Windows host names hold and
// resolvers accept), with an optional trailing dot, 253 characters at most.
func checkHostName(name string) error {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > 253 {
		return fmt.Errorf("is %d characters long, more than 253", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if err := checkLabelOf(label, true); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(label string) error { return checkLabelOf(label, false) }

func checkLabelOf(label string, underscore bool) error {
	if label == "" || len(label) > 63 {
		return fmt.Errorf("has a label of %d characters (1 to 63 allowed)", len(label))
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return fmt.Errorf("label %s starts or ends with a hyphen", shown(label))
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || underscore && c == '_') {
			allowed := "letters, digits and hyphens"
			if underscore {
				allowed = "letters, digits, hyphens and underscores"
			}
			return fmt.Errorf("label %s holds %q: only %s are allowed", shown(label), c, allowed)
		}
	}
	return nil
}

// targets returns the DCs the configuration names: URL's list, or
// those DNS lists for Domain. c must be valid.
func (c Config) targets(ctx context.Context) ([]target, error) {
	if c.URL != "" {
		return parseTargets(c.URL)
	}
	r := resolverOf(c.Resolver)
	targets, err := discoverTargets(ctx, r, c.Domain, c.Site, c.DomainSuffixes, c.log())
	if err != nil {
		return nil, err
	}
	return pinAddrs(ctx, r, targets), nil
}

// pinAddrs resolves each discovered DC's name to its address once, at discovery:
// in AD the DNS servers are often the DCs themselves, and a dial that had to ask a
// dead DC's DNS for another DC's address would stall the failover. The certificate is
// still verified against the name. A name that does not resolve now is left for the
// dial to resolve.
func pinAddrs(ctx context.Context, r *net.Resolver, targets []target) []target {
	out := make([]target, len(targets))
	for i, t := range targets {
		out[i] = t
		host, port, err := net.SplitHostPort(t.addr)
		if err != nil || net.ParseIP(host) != nil {
			continue
		}
		ips, err := r.LookupIPAddr(ctx, host)
		if err == nil && len(ips) > 0 {
			out[i].addr = net.JoinHostPort(ips[0].IP.String(), port)
		}
	}
	return out
}
