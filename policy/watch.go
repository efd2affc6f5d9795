package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the policy whenever its directory changes, once the directory has
// been quiet for the debounce interval, until ctx ends or Close is called. The
// bundled policy cannot change, so Watch does nothing for it. fsnotify watches
// directories, not files: every directory of the policy is watched, which also
// catches the symlink swap by which Kubernetes updates a ConfigMap volume.
func (a *Authorizer) Watch(ctx context.Context) error {
	if a.cfg.Dir == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watchCancel != nil {
		return errors.New("policy: already watching")
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("policy: watch %s: %w", a.cfg.Dir, err)
	}
	if err := addDirs(w, a.cfg.Dir); err != nil {
		w.Close()
		return fmt.Errorf("policy: watch %s: %w", a.cfg.Dir, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	a.watchCancel, a.watchDone = cancel, make(chan struct{})
	go a.watch(ctx, w, a.watchDone)
	return nil
}

// addDirs watches root and its subdirectories, skipping hidden ones (their
// content is reached through the symlinks the loader follows).
func addDirs(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}

func (a *Authorizer) watch(ctx context.Context, w *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	defer w.Close()
	debounce := a.cfg.ReloadDebounce
	if debounce == 0 {
		debounce = DefaultReloadDebounce
	}
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
				// A new subdirectory must be watched too; errors surface on reload.
				_ = addDirs(w, ev.Name)
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			a.logger.Warn("policy: watching the directory", "dir", a.cfg.Dir, "err", err)
			timer.Reset(debounce)
		case <-timer.C:
			// Reload logs and records its own failure.
			_ = a.Reload(ctx)
		}
	}
}

// Close stops watching the policy directory.
func (a *Authorizer) Close() error {
	a.mu.Lock()
	cancel, done := a.watchCancel, a.watchDone
	a.watchCancel = nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
