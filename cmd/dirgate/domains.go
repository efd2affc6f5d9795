package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/dirgate/dirgate/upstream/breaker"
	"github.com/dirgate/dirgate/upstream/domains"
	"github.com/dirgate/dirgate/upstream/ldap"
	"gopkg.in/yaml.v3"
)

// domainKeys are the keys of one domain of ldap-domains-file, each bound to the
// ldap.Config field it sets, as the home domain's ldap-* setting of the same name
// (ldap-base-dn: base-dn, ldap-timeout: timeout) sets it. The inheritedKeys default
// to the home domain's value; every other field is the home domain's.
var domainKeys = []struct{ key, field string }{
	{"base-dn", "BaseDN"}, {"url", "URL"}, {"domain", "Domain"}, {"domain-suffixes", "DomainSuffixes"},
	{"site", "Site"}, {"bind-dn", "BindDN"}, {"password-file", "PasswordFile"}, {"ca-file", "CAFile"},
	{"pool-size", "PoolSize"}, {"dial-timeout", "DialTimeout"}, {"attempt-timeout", "AttemptTimeout"}, {"timeout", "RequestTimeout"},
}

// inheritedKeys are the keys whose field keeps the home domain's value when the
// domain does not give it; the others must be given.
var inheritedKeys = map[string]bool{"pool-size": true, "dial-timeout": true, "attempt-timeout": true, "timeout": true}

// domainKeyList names the keys for error messages.
func domainKeyList() string {
	keys := make([]string, len(domainKeys))
	for i, k := range domainKeys {
		keys[i] = k.key
	}
	return strings.Join(keys, ", ")
}

// loadDomains reads ldap-domains-file: the further domains served beside the home
// domain of the ldap-* settings (docs/settings.md, "Several domains"), each an
// ldap.Config that is home's with the file's keys in place of the home domain's.
// It reports every problem at once, each naming the file, the domain and the key.
func loadDomains(path string, home ldap.Config) ([]ldap.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", settingName("ldap-domains-file"), err)
	}
	cfgs, err := parseDomains(data, home)
	if err != nil {
		var out []error
		for _, e := range fielderr.List(err) {
			out = append(out, fmt.Errorf("%s: %s: %w", settingName("ldap-domains-file"), path, e))
		}
		return nil, errors.Join(out...)
	}
	return cfgs, nil
}

// settingName is a setting as errors name it: ldap-url (DIRGATE_LDAP_URL).
func settingName(s string) string { return fmt.Sprintf("%s (%s)", s, envName(s)) }

// parseDomains parses the file's content (see loadDomains):
//
//	domains:
//	  - base-dn: DC=fabrikam,DC=example,DC=net
//	    url: ldaps://dc1.fabrikam.example.net
//	    bind-dn: CN=svc-dirgate,CN=Users,DC=fabrikam,DC=example,DC=net
//	    password-file: /run/secrets/fabrikam-password
//	    ca-file: /etc/dirgate/fabrikam-ca.pem
//
// Unknown keys, keys given twice, values of the wrong shape, a missing or invalid
// field (ldap.Config.Validate) and a base DN that is another's or the home domain's
// are refused. A base DN below or above another's is not: a child domain of the
// same forest is served beside its parent (domains.Overlap).
func parseDomains(data []byte, home ldap.Config) ([]ldap.Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("holds no domains: want a key domains listing them")
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping with the key domains", top.Line)
	}
	var list *yaml.Node
	var errs []error
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch {
		case k.Value != "domains":
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (the only key is domains)", k.Line, k.Value))
		case list != nil:
			errs = append(errs, fmt.Errorf("line %d: domains: given twice", k.Line))
		default:
			list = v
		}
	}
	switch {
	case list == nil && len(errs) == 0:
		return nil, errors.New("has no key domains")
	case list == nil:
		return nil, errors.Join(errs...)
	case list.Kind != yaml.SequenceNode:
		return nil, errors.Join(append(errs, fmt.Errorf("line %d: domains: want a list of domains", list.Line))...)
	case len(list.Content) == 0:
		return nil, errors.Join(append(errs, fmt.Errorf("line %d: domains: lists no domain (leave ldap-domains-file unset to serve the home domain alone)", list.Line))...)
	}
	homeBase, _ := dirgate.ParseDN(home.BaseDN) // the home domain's own error is reported with its setting
	type parsed struct {
		name string
		base dirgate.DN
	}
	var seen []parsed
	if !homeBase.IsZero() {
		seen = append(seen, parsed{name: "the home domain (" + settingName("ldap-base-dn") + ")", base: homeBase})
	}
	var out []ldap.Config
	for i, item := range list.Content {
		name := fmt.Sprintf("domains[%d] (line %d)", i, item.Line)
		cfg, ierrs := parseDomain(item, home)
		for _, e := range ierrs {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
		if ierrs != nil {
			continue
		}
		base := dirgate.MustParseDN(cfg.BaseDN) // validated
		for _, o := range seen {
			if err := domains.Overlap(o.base, base); err != nil {
				errs = append(errs, fmt.Errorf("%s: base-dn: %w %s: each domain is served once", name, err, o.name))
			}
		}
		seen = append(seen, parsed{name: name, base: base})
		out = append(out, cfg)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parseDomain reads one item of domains into a copy of home.
func parseDomain(item *yaml.Node, home ldap.Config) (ldap.Config, []error) {
	if item.Kind != yaml.MappingNode {
		return ldap.Config{}, []error{errors.New("want a mapping of " + domainKeyList())}
	}
	cfg := home
	cfg.URL, cfg.Domain, cfg.DomainSuffixes, cfg.Site = "", "", nil, ""
	cfg.BindDN, cfg.PasswordFile, cfg.BaseDN, cfg.CAFile = "", "", "", ""
	var errs []error
	given := map[string]bool{} // keys seen, well-formed or not
	for i := 0; i+1 < len(item.Content); i += 2 {
		k, v := item.Content[i], item.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: a key must be a name", k.Line))
			continue
		}
		if given[k.Value] {
			errs = append(errs, fmt.Errorf("line %d: %s: given twice", k.Line, k.Value))
			continue
		}
		given[k.Value] = true
		if k.Value == "domain-suffixes" {
			var suffixes []string
			switch {
			case v.Kind == yaml.SequenceNode && v.Decode(&suffixes) == nil:
			case v.Kind == yaml.ScalarNode && v.Tag == "!!str":
				var l commaList
				l.Set(v.Value)
				suffixes = l
			default:
				errs = append(errs, fmt.Errorf("line %d: domain-suffixes: want a list of DNS suffixes", v.Line))
				continue
			}
			cfg.DomainSuffixes = suffixes
			continue
		}
		if inheritedKeys[k.Value] {
			if err := setTuning(&cfg, k.Value, v); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err))
			}
			continue
		}
		var dst *string
		switch k.Value {
		case "base-dn":
			dst = &cfg.BaseDN
		case "url":
			dst = &cfg.URL
		case "domain":
			dst = &cfg.Domain
		case "site":
			dst = &cfg.Site
		case "bind-dn":
			dst = &cfg.BindDN
		case "password-file":
			dst = &cfg.PasswordFile
		case "ca-file":
			dst = &cfg.CAFile
		default:
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (a domain's keys are %s)", k.Line, k.Value, domainKeyList()))
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			errs = append(errs, fmt.Errorf("line %d: %s: want a string", v.Line, k.Value))
			continue
		}
		*dst = v.Value
	}
	keyOf := map[string]string{}
	for _, k := range domainKeys {
		keyOf[k.field] = k.key
	}
	for _, e := range fielderr.List(cfg.Validate()) {
		fe, ok := e.(*fielderr.Error)
		if !ok {
			errs = append(errs, e)
			continue
		}
		key, ours := keyOf[fe.Field]
		if !ours {
			continue // the home domain's setting, reported under its own name
		}
		if given[key] && !set(cfg, fe.Field) || !given[key] && inheritedKeys[key] {
			continue // malformed: reported above; or the home domain's, reported with its setting
		}
		errs = append(errs, errors.New(fe.Render(func(field string) string {
			if k, ok := keyOf[field]; ok {
				return k
			}
			return "the home domain's LDAP." + field
		})))
	}
	return cfg, errs
}

// setTuning sets one of the keys that default to the home domain's value: the pool
// size (a whole number) or a timeout (a Go duration, as the ldap-* settings take).
func setTuning(cfg *ldap.Config, key string, v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return errors.New("want a value")
	}
	if key == "pool-size" {
		n, err := strconv.Atoi(v.Value)
		if err != nil || v.Tag != "!!int" {
			return errors.New("want a whole number")
		}
		cfg.PoolSize = n
		return nil
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil || v.Tag != "!!str" {
		return errors.New("want a duration such as 1.5s")
	}
	switch key {
	case "dial-timeout":
		cfg.DialTimeout = d
	case "attempt-timeout":
		cfg.AttemptTimeout = d
	default:
		cfg.RequestTimeout = d
	}
	return nil
}

// set reports whether the field of cfg that a domain's key sets holds a value.
func set(cfg ldap.Config, field string) bool {
	switch field {
	case "BaseDN":
		return cfg.BaseDN != ""
	case "URL":
		return cfg.URL != ""
	case "Domain":
		return cfg.Domain != ""
	case "DomainSuffixes":
		return cfg.DomainSuffixes != nil
	case "Site":
		return cfg.Site != ""
	case "BindDN":
		return cfg.BindDN != ""
	case "PasswordFile":
		return cfg.PasswordFile != ""
	case "CAFile":
		return cfg.CAFile != ""
	case "PoolSize", "DialTimeout", "AttemptTimeout", "RequestTimeout":
		return true // parsed: a value out of bounds is the key's own error
	}
	return false
}

// openDomains opens the further domains of ldap-domains-file, each an LDAP
// upstream of its own (with its own DCs, service account and CAs, and the home
// domain's other ldap-* settings), and returns the router over them and the home
// domain (upstream/domains). A domain that cannot be opened (no DC answers, a wrong
// password, a base DN outside the DCs' domain) stops the start, as the home domain's
// does. Each domain's changes are followed (startFeed); the router names the attributes
// every domain's schema withholds and sends each sign-in name to its domain.
func (m *Main) openDomains(ctx context.Context, home ldap.Config, homeDir *ldap.Directory, homeUpstream dirgate.Directory) (dirgate.Directory, error) {
	cfgs, err := loadDomains(m.Config.LDAPDomainsFile, home)
	if err != nil {
		return nil, err
	}
	doms := []domains.Domain{{BaseDN: home.BaseDN, SID: homeDir.DomainSID(), ForestDomains: homeDir.ForestDomainNCs(), Dir: homeUpstream,
		Schema: homeDir, Checker: homeDir, Changes: homeDir, Foreign: homeDir}}
	for _, cfg := range cfgs {
		name := dirgate.MustParseDN(cfg.BaseDN).DomainName() // validated by loadDomains
		cfg.Logger, cfg.Breaker = m.Logger.With("domain", name), m.serverBreaker("ldap:"+name)
		d, err := cfg.Open(ctx)
		if err != nil {
			return nil, fmt.Errorf("ldap upstream: domain %s (%s): %w", name, settingName("ldap-domains-file"), err)
		}
		m.closers = append(m.closers, func() error { d.Close(); return nil })
		m.forestOfSeveral = m.forestOfSeveral || len(d.ForestDomainNCs()) > 0
		// Reported, not gating: the home domain serves without it, listing its
		// members as the home domain holds them.
		m.ready.add("upstream "+name, func(context.Context) error { return serversReady(d.Servers()) })
		doms = append(doms, domains.Domain{BaseDN: cfg.BaseDN, SID: d.DomainSID(), ForestDomains: d.ForestDomainNCs(), Schema: d, Checker: d,
			Changes: d, Foreign: d, Dir: breaker.New(d, breaker.Settings{Name: "ldap:" + name, TelemetryOnly: true})})
	}
	r, err := domains.Config{Domains: doms, Logger: m.Logger}.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("ldap upstream: %w", err)
	}
	// Passwords are checked outside the breakers, as the home domain's are. Each
	// domain's changes are followed by a feed of its own (startFeed).
	m.schema, m.checker, m.changes = r, r, r.ChangeSources()
	return r, nil
}
