package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate/internal/filewatch"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
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
	if c.Leaf == nil { // LoadX509KeyPair fills it since Go 1.23; kept for GODEBUG=x509keypairleaf=0
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("tls: parse %s: %w", r.certFile, err)
		}
	}
	r.cert.Store(&c)
	return nil
}

// registerMetrics reports the served certificate's expiry at every scrape, so that
// a renewal shows at the next scrape after its reload, and an alert can warn before
// the certificate expires (deploy/prometheus/alerts.yaml). The caller unregisters it.
func (r *certReloader) registerMetrics() (metric.Registration, error) {
	m := otel.Meter("github.com/dirgate/dirgate/cmd/dirgate")
	expiry, err := m.Float64ObservableGauge("dirgate_tls_certificate_expiry_timestamp_seconds", metric.WithUnit("s"),
		metric.WithDescription("When the served TLS certificate expires (its notAfter), in seconds since the Unix epoch."))
	if err != nil {
		return nil, fmt.Errorf("tls: certificate metric: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(expiry, float64(r.cert.Load().Leaf.NotAfter.Unix()))
		return nil
	}, expiry)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate metric: %w", err)
	}
	return reg, nil
}

// tls12Suites are the only cipher suites offered with TLS 1.2: ECDHE key exchange
// (forward secrecy) with an AEAD cipher (AES-GCM, ChaCha20-Poly1305), for ECDSA and
// RSA certificates. Go's own defaults would also accept ECDHE with AES-CBC, and, on
// an older go directive or GODEBUG=tlsrsakex=1, RSA key exchange (AES256-SHA): both
// are listed out here rather than left to the toolchain. TLS 1.3's suites are all
// AEAD and not configurable.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// config is the server's TLS configuration: TLS 1.2 or later, AEAD suites with
// forward secrecy only (tls12Suites), the current certificate.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: tls12Suites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cert.Load(), nil
		},
	}
}

// watch reloads the pair after each burst of changes to either file (a renewal
// writes two), until ctx ends.
func (r *certReloader) watch(ctx context.Context) error {
	err := filewatch.Watch(ctx, []string{r.certFile, r.keyFile}, 200*time.Millisecond, func() {
		err := r.reload()
		if err != nil {
			r.log.Error("tls certificate reload failed; the previous certificate stays in service", "err", err)
		} else {
			r.log.Info("tls certificate reloaded", "cert_file", r.certFile)
		}
		if r.onReload != nil {
			r.onReload(err)
		}
	}, func(err error) { r.log.Error("tls certificate watch failed", "err", err) })
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}
