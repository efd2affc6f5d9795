package load

import (
	"bytes"
	"context"
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
