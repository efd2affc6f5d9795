package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:80": true, "127.1.2.3:0": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "example.com:80": false, "bad": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}

// TestPlainHTTPSignInWarns: sign-in on plain HTTP on every interface logs a
// warning at start-up; on loopback it does not. (The server is closed at once: no
// traffic is sent to it.)
func TestPlainHTTPSignInWarns(t *testing.T) {
	for listen, want := range map[string]bool{"0.0.0.0:0": true, "127.0.0.1:0": false} {
		cfg, err := LoadConfig([]string{"--listen", listen, "--decision-log", "off"}, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		m := NewMain(cfg, io.Discard, &log)
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if got := strings.Contains(log.String(), "sign-in is served over plain HTTP on a non-loopback address"); got != want {
			t.Errorf("%s: warned %v\n%s", listen, got, log.String())
		}
	}
}
