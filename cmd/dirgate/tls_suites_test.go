package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// issueRSA is issue with an RSA key: only an RSA certificate can serve RSA key
// exchange (AES256-SHA), so refusing that suite means something only with one.
func (ca *testCA) issueRSA(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "dirgate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	writeAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// startTLS runs the demo over HTTPS with a certificate from issue.
func startTLS(t *testing.T, ca *testCA, issue func(*testing.T, int64, string, string)) *Main {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue(t, 7, certFile, keyFile)
	return startMain(t, nil, "--tls-cert-file", certFile, "--tls-key-file", keyFile)
}

// TestTLSSuites: with TLS 1.2, a real handshake offering only a non-AEAD suite (RSA
// key exchange: AES256-SHA; ECDHE with CBC) fails, one offering an AEAD suite
// succeeds, for RSA and ECDSA certificates alike; TLS 1.3 works.
func TestTLSSuites(t *testing.T) {
	ca := newTestCA(t)
	for _, c := range []struct {
		name   string
		issue  func(*testing.T, int64, string, string)
		refuse []uint16
		accept []uint16
	}{
		{"RSA", ca.issueRSA,
			[]uint16{tls.TLS_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
				tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256},
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
		{"ECDSA", ca.issue,
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256},
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := startTLS(t, ca, c.issue)
			dial := func(cfg *tls.Config) (uint16, error) {
				cfg.RootCAs, cfg.ServerName = ca.pool, "127.0.0.1"
				conn, err := tls.Dial("tcp", m.Addr(), cfg)
				if err != nil {
					return 0, err
				}
				defer conn.Close()
				return conn.ConnectionState().CipherSuite, nil
			}
			for _, s := range c.refuse {
				if got, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s}}); err == nil {
					t.Errorf("a TLS 1.2 client offering only %s got a connection (%s)", tls.CipherSuiteName(s), tls.CipherSuiteName(got))
				}
			}
			for _, s := range c.accept {
				if got, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s}}); err != nil || got != s {
					t.Errorf("a TLS 1.2 client offering only %s: %v (%s)", tls.CipherSuiteName(s), err, tls.CipherSuiteName(got))
				}
			}
			if _, err := dial(&tls.Config{MinVersion: tls.VersionTLS13}); err != nil {
				t.Errorf("TLS 1.3: %v", err)
			}
		})
	}
}

// TestHSTS: every answer over HTTPS carries Strict-Transport-Security (the API's
// errors, the probes, an unknown path); none over plain HTTP does.
func TestHSTS(t *testing.T) {
	ca := newTestCA(t)
	m := startTLS(t, ca, ca.issue)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	for _, path := range []string{"/restApi/api/directoryObjects/groupMembers?group=x", "/healthz", "/readyz", "/nowhere",
		"/restApi/api/authSessions/create"} {
		res, err := client.Get("https://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("HTTPS %s (%d): Strict-Transport-Security %q", path, res.StatusCode, got)
		}
	}
	// The metrics listener serves HTTPS with the same certificate, and the header.
	res, err := client.Get("https://" + m.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Strict-Transport-Security"); res.StatusCode != 200 || got != "max-age=31536000" {
		t.Errorf("HTTPS /metrics (%d): Strict-Transport-Security %q", res.StatusCode, got)
	}
	plain := startMain(t, nil)
	for _, path := range []string{"/healthz", "/nowhere", "/restApi/api/directoryObjects/groupMembers?group=x"} {
		res, err := http.Get("http://" + plain.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if h := res.Header.Values("Strict-Transport-Security"); len(h) != 0 || strings.Contains(res.Header.Get("Strict-Transport-Security"), "max-age") {
			t.Errorf("plain HTTP %s: Strict-Transport-Security %q", path, h)
		}
	}
}
