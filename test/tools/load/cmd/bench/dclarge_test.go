package main

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/dirgate/dirgate/test/tools/load"
)

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want string
	}{
		{nil, ""},
		{[]float64{2}, "2.00 [2.00-2.00]"},
		{[]float64{3, 1, 2}, "2.00 [1.00-3.00]"},
		{[]float64{4, 1, 2, 3}, "2.50 [1.00-4.00]"},
	} {
		if got := spread(c.in, 2); got != c.want {
			t.Errorf("spread(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLDAPEscape(t *testing.T) {
	in := `CN=a\,b (c*),OU=x` + "\x00"
	want := `CN=a\5c,b \28c\2a\29,OU=x\00`
	if got := ldapEscape(in); got != want {
		t.Errorf("ldapEscape(%q) = %q, want %q", in, got, want)
	}
}

// TestSessionCPU reads the session of this test process: it holds at least this
// process, so its CPU time is at least ours.
func TestSessionCPU(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	sid, err := strconv.Atoi(string(f[3])) // field 6: the session
	if err != nil {
		t.Fatal(err)
	}
	own, err := load.ProcessCPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sessionCPU(sid)
	if err != nil {
		t.Fatal(err)
	}
	if got < own {
		t.Errorf("session %d: %v of CPU, less than this process's %v", sid, got, own)
	}
	if _, err := sessionCPU(1 << 30); err == nil {
		t.Error("a session no process has: no error")
	}
}
