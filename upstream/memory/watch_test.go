package memory

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// TestWatchReloads: a changed file is loaded again and reported as a resync; a file
// that does not load leaves the previous directory serving and is an error.
func TestWatchReloads(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dir.ldif")
	if err := os.WriteFile(path, demoLDIF, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.ReadChanges(ctx, dirgate.ChangePosition{}, 10)
	if err != nil || b.Resync != dirgate.ResyncNoPosition {
		t.Fatalf("first read: %+v %v", b, err)
	}
	pos := b.Position
	if b, err = d.ReadChanges(ctx, pos, 10); err != nil || b.Resync != "" || b.Position.USN != pos.USN {
		t.Fatalf("unchanged file: %+v %v", b, err)
	}
	id := dirgate.MustParseIdentifier(aaron(t, d).DN)

	changed := bytes.Replace(demoLDIF, []byte("displayName: Aaron Anderson"), []byte("displayName: Aaron Renamed"), 1)
	writeLater(t, path, changed)
	b, err = d.ReadChanges(ctx, pos, 10)
	if err != nil || b.Resync != dirgate.ResyncReloaded {
		t.Fatalf("changed file: %+v %v", b, err)
	}
	if o, _ := d.Lookup(ctx, id, []string{"displayname"}); o.Properties["displayname"][0] != "Aaron Renamed" {
		t.Fatalf("not reloaded: %q", o.Properties["displayname"])
	}
	pos = b.Position

	writeLater(t, path, []byte("dn: not a dn\n"))
	if _, err := d.ReadChanges(ctx, pos, 10); err == nil {
		t.Fatal("a file that does not load was accepted")
	}
	if o, err := d.Lookup(ctx, id, []string{"displayname"}); err != nil || o.Properties["displayname"][0] != "Aaron Renamed" {
		t.Fatalf("the previous directory stopped serving: %v", err)
	}
}

func aaron(t *testing.T, d *Directory) dirgate.Object {
	t.Helper()
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, r := range d.records {
		if o, _ := r.entry.ToObject(nil, time.Now()); o.DisplayName == "Aaron Anderson" && !r.group {
			return o
		}
	}
	t.Fatal("no Aaron Anderson in the demo")
	return dirgate.Object{}
}

// writeLater replaces the file through a rename, as editors and Kubernetes do, so
// that it is a new file even within the file system's time resolution.
func writeLater(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
