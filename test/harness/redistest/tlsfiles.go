package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files for a TLS server: its certificate and key, and the CA that
// signed it, which clients trust.
type TLSFiles struct {
	CA, Cert, Key string
}

// NewTLSFiles makes a CA and a certificate for 127.0.0.1 signed by it, valid for a
// day, in a temporary directory.
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	fail := func(err error) {
		if err != nil {
			t.Fatalf("redistest: TLS files: %v", err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	fail(err)
	ca, err := x509.ParseCertificate(caDER)
	fail(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	fail(err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	fail(err)
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	for path, block := range map[string]*pem.Block{
		f.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		f.Cert: {Type: "CERTIFICATE", Bytes: der},
		f.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		fail(os.WriteFile(path, pem.EncodeToMemory(block), 0o600))
	}
	return f
}
