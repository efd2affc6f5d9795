package sambatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recordingTB records Skip and Fatal instead of stopping the goroutine, so a
// test can check which one envFrom chose. Its embedded nil testing.TB makes
// any other method panic, which would fail the test loudly.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

// writeCA writes a freshly generated self-signed CA certificate as PEM.
func writeCA(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "sambatest unit CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestEnvFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	svcPW := write("svc.pw", "Svc-secret-1")
	adminPW := write("admin.pw", "Admin-secret-2\n")
	emptyPW := write("empty.pw", "\n")
	notPEM := write("not.pem", "not a certificate")
	caFile := filepath.Join(dir, "ca.pem")
	ca := writeCA(t, caFile)

	full := map[string]string{
		VarURL:               "ldaps://127.0.0.1:636",
		VarStartTLSURL:       "ldap://127.0.0.1:389",
		VarBaseDN:            "DC=corp,DC=example,DC=com",
		VarBindDN:            "CN=dirgate-svc,CN=Users,DC=corp,DC=example,DC=com",
		VarPasswordFile:      svcPW,
		VarAdminDN:           "CN=Administrator,CN=Users,DC=corp,DC=example,DC=com",
		VarAdminPasswordFile: adminPW,
		VarCAFile:            caFile,
		VarSambaDir:          "/tmp/dgs/dc.x",
	}
	with := func(changes map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for k, v := range changes {
			m[k] = v
		}
		return m
	}

	type outcome int
	const (
		ok outcome = iota
		skip
		fatal
	)
	tests := []struct {
		name    string
		env     map[string]string
		want    outcome
		wantMsg string // substring of the skip/fatal message
	}{
		// A developer without a DC runs go test ./...: the integration tests skip.
		{name: "nothing set on a developer machine", env: map[string]string{}, want: skip, wantMsg: "dc.sh start"},
		// CI must never pass by skipping.
		{name: "nothing set in CI", env: map[string]string{"CI": "true"}, want: fatal, wantMsg: "CI must not skip"},
		// CI=false is how a developer says "not CI" explicitly.
		{name: "CI=false behaves like a developer machine", env: map[string]string{"CI": "false"}, want: skip},
		// A half-sourced env file is a mistake, not an absent DC: never skip it.
		{name: "partial configuration fails even on a developer machine", env: map[string]string{VarURL: "ldaps://127.0.0.1:636"}, want: fatal, wantMsg: VarBindDN},
		// The happy path; CI=true does not change it.
		{name: "complete configuration in CI", env: with(map[string]string{"CI": "true"}), want: ok},
		// A password file that vanished (DC stopped under the test) must fail.
		{name: "missing password file", env: with(map[string]string{VarPasswordFile: filepath.Join(dir, "nope")}), want: fatal, wantMsg: VarPasswordFile},
		// An empty password would turn the bind into an unauthenticated one.
		{name: "empty admin password", env: with(map[string]string{VarAdminPasswordFile: emptyPW}), want: fatal, wantMsg: "is empty"},
		// A CA file without a certificate would leave TLS unverifiable.
		{name: "CA file without certificate", env: with(map[string]string{VarCAFile: notPEM}), want: fatal, wantMsg: "no PEM certificate"},
		// Traffic may only go to loopback.
		{name: "non-loopback host", env: with(map[string]string{VarURL: "ldaps://192.0.2.1:636"}), want: fatal, wantMsg: "not a loopback"},
		// The LDAPS URL must really be LDAPS, or tests would bind in clear.
		{name: "plain scheme for the LDAPS URL", env: with(map[string]string{VarURL: "ldap://127.0.0.1:636"}), want: fatal, wantMsg: `want "ldaps"`},
		// A port is required: the DC's ports are fixed and named explicitly.
		{name: "URL without port", env: with(map[string]string{VarStartTLSURL: "ldap://localhost"}), want: fatal, wantMsg: "no port"},
		// go-ldap must be able to parse every DN the tests bind with.
		{name: "unparsable bind DN", env: with(map[string]string{VarBindDN: "not a dn"}), want: fatal, wantMsg: VarBindDN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTB{}
			got := envFrom(rec, func(k string) string { return tt.env[k] })
			switch {
			case tt.want == ok && (rec.skipped || rec.failed):
				t.Fatalf("want success, got skipped=%v failed=%v: %s", rec.skipped, rec.failed, rec.msg)
			case tt.want == skip && (!rec.skipped || rec.failed):
				t.Fatalf("want skip, got skipped=%v failed=%v: %s", rec.skipped, rec.failed, rec.msg)
			case tt.want == fatal && (!rec.failed || rec.skipped):
				t.Fatalf("want fatal, got skipped=%v failed=%v: %s", rec.skipped, rec.failed, rec.msg)
			}
			if !strings.Contains(rec.msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", rec.msg, tt.wantMsg)
			}
			if tt.want != ok {
				return
			}
			if got.Password != "Svc-secret-1" || got.AdminPassword != "Admin-secret-2" {
				t.Errorf("passwords = %q, %q; want file contents without line break", got.Password, got.AdminPassword)
			}
			if got.BindDN != full[VarBindDN] || got.URL != full[VarURL] || got.SambaDir != full[VarSambaDir] {
				t.Errorf("got %+v, fields not copied from the environment", got)
			}
			if _, err := ca.Verify(x509.VerifyOptions{Roots: got.CAPool}); err != nil {
				t.Errorf("CAPool does not hold the CA: %v", err)
			}
			if cfg := got.TLSConfig(); cfg.ServerName != "127.0.0.1" || cfg.RootCAs != got.CAPool || cfg.InsecureSkipVerify {
				t.Errorf("TLSConfig = ServerName %q, RootCAs %p, Insecure %v; want verified 127.0.0.1 with CAPool",
					cfg.ServerName, cfg.RootCAs, cfg.InsecureSkipVerify)
			}
		})
	}
}
