package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// expiryMetric scrapes /metrics over HTTPS and returns the value of
// dirgate_tls_certificate_expiry_timestamp_seconds, and whether it is there.
func expiryMetric(t *testing.T, client *http.Client, addr string) (float64, bool) {
	t.Helper()
	res, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "dirgate_tls_certificate_expiry_timestamp_seconds") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return v, true
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return 0, false
}

// TestTLSCertificateExpiryMetric: /metrics, served over HTTPS with the API's
// certificate on its own listener, reports the served certificate's notAfter in Unix
// seconds, and the renewed certificate's after a reload.
func TestTLSCertificateExpiryMetric(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := time.Now().Add(5 * 24 * time.Hour).Truncate(time.Second)
	ca.issueUntil(t, 1, certFile, keyFile, first)
	cfg, err := LoadConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-level", "error",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, io.Discard, io.Discard)
	reloads := make(chan error, 10)
	m.onCertReload = func(err error) { reloads <- err }
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}

	if got, ok := expiryMetric(t, client, m.MetricsAddr()); !ok || got != float64(first.Unix()) {
		t.Fatalf("expiry metric %v (present %v), want %d", got, ok, first.Unix())
	}
	renewed := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	ca.issueUntil(t, 2, certFile, keyFile, renewed)
	waitReload(t, reloads, false)
	if got, ok := expiryMetric(t, client, m.MetricsAddr()); !ok || got != float64(renewed.Unix()) {
		t.Fatalf("after renewal: expiry metric %v (present %v), want %d", got, ok, renewed.Unix())
	}
}
