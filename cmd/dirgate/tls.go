package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// certReloader serves the certificate of a key pair on disk, reloading it when either
// file changes, so that a renewed certificate (cert-manager rewriting a Secret, say)
// is served to new connections without a restart. A pair that fails to load (a
// half-written file, a key that does not match) keeps the previous one in service.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]
	// onReload, when set, is told every reload's outcome (tests).
	onReload func(error)
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&c)
	return nil
}

// config is the server's TLS configuration: TLS 1.2 or later, Go's default cipher
// suites (all AEAD with forward secrecy for TLS 1.2), the current certificate.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
	}
}

// watch reloads the pair after each burst of changes in the files' directories (the
// directories, not the files, so that replaced files and Kubernetes' symlink swaps
// of mounted Secrets are seen), until ctx ends.
func (r *certReloader) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("tls: watch: %w", err)
	}
	for _, dir := range []string{filepath.Dir(r.certFile), filepath.Dir(r.keyFile)} {
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("tls: watch %s: %w", dir, err)
		}
	}
	names := map[string]bool{filepath.Base(r.certFile): true, filepath.Base(r.keyFile): true, "..data": true}
	go func() {
		defer w.Close()
		// A renewal writes two files; reload once both have landed.
		var debounce <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Base(ev.Name)] {
					debounce = time.After(200 * time.Millisecond)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.log.Error("tls certificate watch failed", "err", err)
			case <-debounce:
				debounce = nil
				err := r.reload()
				if err != nil {
					r.log.Error("tls certificate reload failed; the previous certificate stays in service", "err", err)
				} else {
					r.log.Info("tls certificate reloaded", "cert_file", r.certFile)
				}
				if r.onReload != nil {
					r.onReload(err)
				}
			}
		}
	}()
	return nil
}
