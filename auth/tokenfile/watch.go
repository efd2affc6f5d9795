package tokenfile

import (
	"context"
	"fmt"
	"time"

	"github.com/dirgate/dirgate/internal/filewatch"
)

// Watch reloads the file whenever it changes, until ctx ends (filewatch: the
// directory is watched, so replaced files and Kubernetes' symlink swaps of mounted
// Secrets are both seen). A reload that fails keeps the previous tokens and is
// logged. onReload, if not nil, is told every outcome (for metrics and tests).
func (f *File) Watch(ctx context.Context, onReload func(error)) error {
	if f.path == "" {
		return nil
	}
	err := filewatch.Watch(ctx, []string{f.path}, 100*time.Millisecond, func() {
		err := f.Reload()
		if err != nil {
			f.log.Error("tokens file reload failed; previous tokens stay in force", "path", f.path, "err", err)
		}
		if onReload != nil {
			onReload(err)
		}
	}, func(err error) { f.log.Error("tokens file watch failed", "err", err) })
	if err != nil {
		return fmt.Errorf("tokenfile: watch: %w", err)
	}
	return nil
}
