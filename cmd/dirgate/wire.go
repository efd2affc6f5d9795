package main

import (
	"context"
	"fmt"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/upstream/memory"
)

// openDirectory builds the configured upstream.
func (m *Main) openDirectory(ctx context.Context) (dirgate.Directory, error) {
	switch m.Config.Upstream {
	case "memory":
		d, err := memory.Config{LDIF: m.Config.MemoryLDIF}.Open()
		if err != nil {
			return nil, fmt.Errorf("memory upstream: %w", err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("upstream %q is not available in this build", m.Config.Upstream)
}
