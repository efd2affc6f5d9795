package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the policy whenever its directory changes, once the directory has
// been quiet for the debounce interval, until ctx ends or Close is called. The
// bundled policy cannot change, so Watch does not watch it.
func (a *Authorizer) Watch(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watchCancel != nil {
		return errors.New("policy: already watching")
	}
	stop := func() {}
	if a.cfg.Dir != "" {
		// Reload logs and records its own failure.
		var err error
		stop, err = WatchDir(ctx, a.cfg.Dir, a.cfg.ReloadDebounce, a.logger, func(ctx context.Context) { _ = a.Reload(ctx) })
		if err != nil {
			return err
		}
	}
	a.watchCancel, a.watchDone = stop, make(chan struct{})
	close(a.watchDone)
	return nil
}

// WatchDir calls reload whenever the policy directory dir changes, once it has
// been quiet for debounce (0: DefaultReloadDebounce), until ctx ends or stop is
// called, which returns once the watching has ended. fsnotify watches
// directories, not files: every directory of the policy is watched, which also
// catches the symlink swap by which Kubernetes updates a ConfigMap volume.
func WatchDir(ctx context.Context, dir string, debounce time.Duration, logger *slog.Logger, reload func(context.Context)) (stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("policy: watch %s: %w", dir, err)
	}
	if err := addDirs(w, dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("policy: watch %s: %w", dir, err)
	}
	if debounce == 0 {
		debounce = DefaultReloadDebounce
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go watch(ctx, dir, w, debounce, logger, reload, done)
	return func() {
		cancel()
		<-done
	}, nil
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

func watch(ctx context.Context, dir string, w *fsnotify.Watcher, debounce time.Duration, logger *slog.Logger,
	reload func(context.Context), done chan struct{}) {
	defer close(done)
	defer w.Close()
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
			logger.Warn("policy: watching the directory", "dir", dir, "err", err)
			timer.Reset(debounce)
		case <-timer.C:
			reload(ctx)
		}
	}
}

// Close stops watching the policy directory and reporting dirgate_policy_broken
// and dirgate_policy_info.
func (a *Authorizer) Close() error {
	a.mu.Lock()
	cancel, done := a.watchCancel, a.watchDone
	a.watchCancel = nil
	reg := a.stateReg
	a.stateReg = nil
	a.mu.Unlock()
	if reg != nil {
		_ = reg.Unregister()
	}
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
