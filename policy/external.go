package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// A policy delivered from elsewhere than a directory (Config.Files: the OPA
// bundles of package opaconfig) changes when its deliverer says so, not when a
// directory does: the deliverer calls Replace with each new delivery and Refuse
// with each delivery it could not use. Both follow the directory's rules: a
// policy that does not load keeps the last good one in force, counts a failed
// reload, and is reported by Ready and Status until a later delivery loads.

// Replace loads fsys as the policy in force, as Reload loads a directory.
func (a *Authorizer) Replace(ctx context.Context, fsys fs.FS) error {
	if a.cfg.Files == nil {
		return errors.New("policy: Replace needs a policy configured with Files")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fsys = fsys
	return a.reload(ctx)
}

// Refuse records a delivery that could not be used before it reached the policy
// (a bundle that failed its download or its signature's verification): the last
// good policy stays in force.
func (a *Authorizer) Refuse(ctx context.Context, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed(ctx, a.current.Load(), fmt.Errorf("refused: %w", err))
}
