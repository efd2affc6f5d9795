package load

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/upstream/memory"
)

// The generated export loads, its group has exactly the generated users as direct
// members, and the same size gives the same bytes.
func TestGeneratedExport(t *testing.T) {
	const n = 50
	export := GeneratedExport(n)
	if !bytes.Equal(export, GeneratedExport(n)) {
		t.Fatal("two exports of one size differ")
	}
	d, err := memory.Load("generated", export)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := d.Lookup(ctx, dirgate.MustParseIdentifier(GeneratedGroupDN), nil)
	if err != nil {
		t.Fatal(err)
	}
	members, err := d.Members(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	guids := map[string]bool{}
	for _, m := range members {
		if m.ObjectType != dirgate.TypeUser || m.AccountStatus == nil || m.PasswordStatus == nil {
			t.Errorf("member %s: type %q, account %v, password %v", m.DN, m.ObjectType, m.AccountStatus, m.PasswordStatus)
		}
		guids[m.GUID] = true
	}
	if len(members) != n || len(guids) != n {
		t.Errorf("%d members, %d GUIDs; want %d", len(members), len(guids), n)
	}
}

// ReadMemory reads this process's resident memory, the peak at least as large.
func TestReadMemory(t *testing.T) {
	m, err := ReadMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("memory %+v", m)
	}
	if _, err := ReadMemory(1 << 30); err == nil { // above any pid_max
		t.Error("no error for a process that cannot exist")
	}
}

// ResetPeak forgets a peak the process no longer holds: 64 MiB touched and returned
// to the system stay in VmHWM until it is reset.
func TestResetPeak(t *testing.T) {
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	b = nil
	debug.FreeOSMemory()
	before, err := ReadMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	if before.Peak-before.RSS < 48<<20 {
		t.Fatalf("64 MiB touched and returned left peak %d, resident %d", before.Peak, before.RSS)
	}
	if err := ResetPeak(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	after, err := ReadMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	if after.Peak-after.RSS > 16<<20 {
		t.Errorf("after the reset the peak is %d, resident %d", after.Peak, after.RSS)
	}
}
