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
// been quiet for the debounce interval, until ctx ends or Close is called; the
// candidate policy's directory likewise. The bundled policy cannot change, so Watch
// does not watch it. fsnotify watches directories, not files: every directory of
// the policy is watched, which also catches the symlink swap by which Kubernetes
// updates a ConfigMap volume.
func (a *Authorizer) Watch(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watchCancel != nil {
		return errors.New("policy: already watching")
	}
	ctx, cancel := context.WithCancel(ctx)
	var dones []chan struct{}
	start := func(dir string, reload func(context.Context)) error {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("policy: watch %s: %w", dir, err)
		}
		if err := addDirs(w, dir); err != nil {
			w.Close()
			return fmt.Errorf("policy: watch %s: %w", dir, err)
		}
		done := make(chan struct{})
		dones = append(dones, done)
		go a.watch(ctx, dir, w, reload, done)
		return nil
	}
	stop := func() {
		cancel()
		for _, d := range dones {
			<-d
		}
	}
	if a.cfg.Dir != "" {
		// Reload logs and records its own failure.
		if err := start(a.cfg.Dir, func(ctx context.Context) { _ = a.Reload(ctx) }); err != nil {
			stop()
			return err
		}
	}
	if a.cand != nil && a.cand.cfg.Dir != "" {
		if err := start(a.cand.cfg.Dir, a.cand.reload); err != nil {
			stop()
			return err
		}
	}
	a.watchCancel, a.watchDone = stop, make(chan struct{})
	close(a.watchDone)
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

func (a *Authorizer) watch(ctx context.Context, dir string, w *fsnotify.Watcher, reload func(context.Context), done chan struct{}) {
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
			a.logger.Warn("policy: watching the directory", "dir", dir, "err", err)
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
