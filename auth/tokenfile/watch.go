package tokenfile

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the file whenever it changes, until ctx ends. It watches the
// directory rather than the file so that editors that replace the file and
// Kubernetes' symlink swaps of mounted Secrets are both seen. A reload that fails
// keeps the previous tokens and is logged. onReload, if not nil, is told every
// outcome (for metrics and tests).
func (f *File) Watch(ctx context.Context, onReload func(error)) error {
	if f.path == "" {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("tokenfile: watch: %w", err)
	}
	dir := filepath.Dir(f.path)
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("tokenfile: watch %s: %w", dir, err)
	}
	go func() {
		defer w.Close()
		// Edits arrive as bursts of events; reload once the burst is over.
		var debounce <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				base := filepath.Base(ev.Name)
				if base == filepath.Base(f.path) || base == "..data" {
					debounce = time.After(100 * time.Millisecond)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				f.log.Error("tokens file watch failed", "err", err)
			case <-debounce:
				debounce = nil
				err := f.Reload()
				if err != nil {
					f.log.Error("tokens file reload failed; previous tokens stay in force", "path", f.path, "err", err)
				}
				if onReload != nil {
					onReload(err)
				}
			}
		}
	}()
	return nil
}
