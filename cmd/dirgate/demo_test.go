package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoOnlyOnLoopback: the embedded demo's public tokens and passwords are
// served on a loopback listen address, or anywhere with demo set; otherwise the
// configuration is refused with a message naming the choices.
func TestDemoOnlyOnLoopback(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	ldif := filepath.Join(dir, "dir.ldif")
	os.WriteFile(tokens, []byte("- token: t\n  subject: CN=x,DC=y\n"), 0o600)
	os.WriteFile(ldif, []byte(""), 0o600)
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"default loopback", nil, nil, true},
		{"IPv6 loopback", []string{"--listen", "[::1]:0"}, nil, true},
		{"localhost", []string{"--listen", "localhost:0"}, nil, true},
		{"all interfaces", []string{"--listen", "0.0.0.0:8080"}, nil, false},
		{"empty host", []string{"--listen", ":8080"}, nil, false},
		{"an address", []string{"--listen", "10.1.2.3:8080"}, nil, false},
		{"demo flag", []string{"--listen", "0.0.0.0:8080", "--demo"}, nil, true},
		{"demo env", nil, map[string]string{"DIRGATE_LISTEN": "0.0.0.0:8080", "DIRGATE_DEMO": "true"}, true},
		{"demo false", []string{"--listen", "0.0.0.0:8080", "--demo=false"}, nil, false},
		// Own tokens on the demo directory: its passwords still sign in...
		{"own tokens, sign-in on", []string{"--listen", "0.0.0.0:8080", "--tokens-file", tokens}, nil, false},
		// ...unless sign-in is off.
		{"own tokens, sign-in off", []string{"--listen", "0.0.0.0:8080", "--tokens-file", tokens, "--signin=false"}, nil, true},
		{"own directory", []string{"--listen", "0.0.0.0:8080", "--tokens-file", tokens, "--memory-ldif", ldif}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadConfig(c.args, func(k string) string { return c.env[k] }, io.Discard)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, want := range []string{"DIRGATE_DEMO", "loopback", "127.0.0.1", "tokens-file", "public"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not say %q: %v", want, err)
					}
				}
			}
		})
	}
	// The YAML file's key, like every other setting's.
	cfgFile := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfgFile, []byte("listen: 0.0.0.0:8080\ndemo: true\n"), 0o600)
	if _, err := LoadConfig([]string{"--config", cfgFile}, func(string) string { return "" }, io.Discard); err != nil {
		t.Errorf("demo: true in the file: %v", err)
	}
}

// TestImageRefusesTheDemo: the container image's own settings (the final stage's
// ENV lines of deploy/Dockerfile) are refused as they are: the image does not
// serve the demo's credentials unless DIRGATE_DEMO=true is given at run time.
func TestImageRefusesTheDemo(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && strings.EqualFold(f[0], "FROM"):
			env = map[string]string{} // a new stage: only the last one's ENV counts
		case len(f) > 1 && strings.EqualFold(f[0], "ENV"):
			for _, kv := range f[1:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		}
	}
	if env["DIRGATE_LISTEN"] == "" {
		t.Fatal("deploy/Dockerfile's final stage sets no DIRGATE_LISTEN: update this test")
	}
	if _, err := LoadConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "DIRGATE_DEMO") {
		t.Errorf("the image's settings %v: %v, want the demo refused", env, err)
	}
	env["DIRGATE_DEMO"] = "true"
	if _, err := LoadConfig(nil, func(k string) string { return env[k] }, io.Discard); err != nil {
		t.Errorf("the image's settings with DIRGATE_DEMO=true: %v", err)
	}
}
