package ldap

// STUB until t24 lands: target and discoverTargets.

import (
	"context"
	"errors"
	"net"
	"strings"
)

type target struct {
	url         string
	addr        string
	implicitTLS bool
	serverName  string
}

type srvResolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

func discoverTargets(ctx context.Context, r srvResolver, domain, site string) ([]target, error) {
	return nil, errors.New("stub")
}

func parseTargets(s string) ([]target, error) {
	var out []target
	for _, u := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		addr, tls, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		out = append(out, target{url: u, addr: addr, implicitTLS: tls, serverName: host})
	}
	return out, nil
}
