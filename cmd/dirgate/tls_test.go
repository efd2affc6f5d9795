package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a throw-away certificate authority for loopback servers.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dirgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a leaf certificate for 127.0.0.1 with serial to certFile and its key to
// keyFile, each replaced in one rename as a careful tool would.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	ca.issueUntil(t, serial, certFile, keyFile, time.Now().Add(time.Hour))
}

// issueUntil is issue with the certificate's notAfter.
func (ca *testCA) issueUntil(t *testing.T, serial int64, certFile, keyFile string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "dirgate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	writeAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedSerial opens a new TLS connection trusting only ca and returns the serial
// number of the certificate the server presented.
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestHTTPS: with a certificate and key, dirgate serves HTTPS only, TLS 1.2 or later,
// and serves a renewed certificate to new connections without a restart; a broken
// renewal keeps the certificate in service.
func TestHTTPS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 100, certFile, keyFile)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var demo strings.Builder
	m := NewMain(cfg, &demo, io.Discard)
	reloads := make(chan error, 10)
	m.onCertReload = func(err error) { reloads <- err }
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	base := "https://" + m.Addr() + "/restApi/api/directoryObjects/groupMembers"
	res, err := client.Get(base + "?group=" + "CN%3DHelp%20Desk%2COU%3DGroups%2CDC%3Dcorp%2CDC%3Dexample%2CDC%3Dcom")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 { // the API over HTTPS: no token, the documented 401
		t.Fatalf("HTTPS request: %d", res.StatusCode)
	}
	if !strings.Contains(demo.String(), "https://"+m.Addr()) {
		t.Errorf("the demo banner does not name the HTTPS address: %s", demo.String())
	}
	// Older protocols are refused, and plain HTTP gets no API answer.
	if c, err := tls.Dial("tcp", m.Addr(), &tls.Config{RootCAs: ca.pool, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if res, err := http.Get("http://" + m.Addr() + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Error("plain HTTP was served on the HTTPS port")
		}
	}

	if got := servedSerial(t, m.Addr(), ca); got != 100 {
		t.Fatalf("served serial %d, want 100", got)
	}
	ca.issue(t, 200, certFile, keyFile)
	waitReload(t, reloads, false)
	if got := servedSerial(t, m.Addr(), ca); got != 200 {
		t.Fatalf("after renewal: served serial %d, want 200", got)
	}
	// The sign-in flow over HTTPS, on a connection made after the renewal.
	client.CloseIdleConnections()
	root := "https://" + m.Addr() + "/restApi"
	res, err = client.Post(root+"/api/authSessions/create", "application/json",
		strings.NewReader(`{"username":"dana.admin@corp.example.com","password":"`+demoPasswords["dana.admin"]+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ses struct{ SessionID string }
	json.NewDecoder(res.Body).Decode(&ses)
	res.Body.Close()
	res, err = client.Post(root+"/api/auth", "application/json", strings.NewReader(`{"sessionId":"`+ses.SessionID+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	json.NewDecoder(res.Body).Decode(&tok)
	res.Body.Close()
	if res.TLS == nil || res.TLS.PeerCertificates[0].SerialNumber.Int64() != 200 || !strings.HasPrefix(tok.Token, "dgt_") {
		t.Fatalf("sign-in over HTTPS after the renewal: %d, token %q", res.StatusCode, tok.Token)
	}
	writeAtomic(t, certFile, []byte("not a certificate"))
	waitReload(t, reloads, true)
	if got := servedSerial(t, m.Addr(), ca); got != 200 {
		t.Fatalf("after a broken renewal: served serial %d, want 200 still", got)
	}
}

// waitReload waits for a reload with an error (wantErr) or without; reloads of the
// other kind (a burst seen in two parts) are skipped.
func waitReload(t *testing.T, reloads chan error, wantErr bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-reloads:
			if (err != nil) == wantErr {
				return
			}
		case <-deadline:
			t.Fatalf("no reload (error: %v) within 10 s", wantErr)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 1, certFile, keyFile)
	otherKey := filepath.Join(dir, "other.key")
	ca.issue(t, 2, filepath.Join(dir, "other.crt"), otherKey)
	for name, args := range map[string][]string{
		"cert without key":   {"--tls-cert-file", certFile},
		"key without cert":   {"--tls-key-file", keyFile},
		"key of another":     {"--tls-cert-file", certFile, "--tls-key-file", otherKey},
		"missing file":       {"--tls-cert-file", filepath.Join(dir, "none.crt"), "--tls-key-file", keyFile},
		"key as certificate": {"--tls-cert-file", keyFile, "--tls-key-file", keyFile},
	} {
		if _, err := LoadConfig(args, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "tls-") {
			t.Errorf("%s: %v, want a tls- setting error", name, err)
		}
	}
}
