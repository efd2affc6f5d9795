// Package filewatch tells a program that files it loaded have changed, so that it can
// reload them in place (the tokens file, the TLS key pair).
package filewatch

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls changed once after each burst of changes to any of paths, until ctx
// ends, and failed with each error of the watcher itself. It watches the files'
// directories rather than the files, so that editors that replace a file and
// Kubernetes' symlink swaps of mounted Secrets and ConfigMaps (the "..data" link)
// are seen; a burst ends after debounce without an event, so that a tool writing
// several files (a key pair) causes one reload. changed and failed run on Watch's
// goroutine, one at a time.
func Watch(ctx context.Context, paths []string, debounce time.Duration, changed func(), failed func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("filewatch: %w", err)
	}
	names := map[string]bool{"..data": true}
	dirs := map[string]bool{}
	for _, p := range paths {
		names[filepath.Base(p)] = true
		dirs[filepath.Dir(p)] = true
	}
	for dir := range dirs {
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("filewatch: watch %s: %w", dir, err)
		}
	}
	go func() {
		defer w.Close()
		var quiet <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Base(ev.Name)] {
					quiet = time.After(debounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				failed(err)
			case <-quiet:
				quiet = nil
				changed()
			}
		}
	}()
	return nil
}
