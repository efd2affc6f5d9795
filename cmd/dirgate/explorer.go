package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/dirgate/dirgate/explorer"
	"github.com/dirgate/dirgate/proxy"
)

// addExplorer mounts the explorer page, which calls the decisions API below
// basePath ("/" for none) and, when signIn (the sign-in flow is served), offers
// sign-in.
func addExplorer(mounts map[string]http.Handler, basePath string, signIn bool) error {
	base := strings.TrimSuffix(basePath, "/")
	c := explorer.Config{DecisionsURL: base + proxy.DecisionsPath}
	if signIn {
		c.SessionURL, c.AuthURL = base+proxy.SessionCreatePath, base+proxy.AuthPath
	}
	page, err := explorer.Mounts(c)
	if err != nil {
		return fmt.Errorf("explorer: %w", err)
	}
	for p, h := range page {
		mounts[p] = h
	}
	return nil
}
