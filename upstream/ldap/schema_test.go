package ldap

import (
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchemaAttributes: the schema's confidential attributes and those naming
// objects (of a DN, SID or security descriptor syntax) are read at open,
// lower-cased, and read again in the background once older than
// SchemaRefreshInterval; a failed read keeps the sets in force. The object's own DN,
// SID and former SIDs and its schema class (adattr.DNPropertyCovered) are not among
// those naming objects, nor an attribute of a string syntax.
func TestSchemaAttributes(t *testing.T) {
	o := newOrg()
	srv := o.srv
	d := o.dir(t, Config{})
	var now atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(start.UnixNano())
	d.now = func() time.Time { return time.Unix(0, now.Load()) }
	keys := func() []string { return slices.Sorted(maps.Keys(d.ConfidentialAttributes())) }
	if got := keys(); !slices.Equal(got, []string{"msfve-recoverypassword", "unixuserpassword"}) {
		t.Fatalf("ConfidentialAttributes = %v", got)
	}
	wantDN := []string{"member", "ms-ds-creatorsid", "msds-allowedtoactonbehalfofotheridentity", "msds-revealedlist",
		"msds-revealedusers", "ntsecuritydescriptor"}
	if got := slices.Sorted(maps.Keys(d.DNAttributes())); !slices.Equal(got, wantDN) {
		t.Fatalf("DNAttributes = %v, want %v", got, wantDN)
	}
	if got, want := slices.Sorted(maps.Keys(d.NamedOnlyProperties())), slices.Sorted(slices.Values(append(keys(), wantDN...))); !slices.Equal(got, want) {
		t.Fatalf("NamedOnlyProperties = %v, want %v", got, want)
	}
	srv.mu.Lock()
	srv.confidential = append(srv.confidential, "ms-Mcs-AdmPwd")
	srv.dnSyntax["manager"] = "2.5.5.1"
	srv.mu.Unlock()
	if got := keys(); len(got) != 2 {
		t.Fatalf("read again before the interval: %v", got)
	}
	now.Store(start.Add(SchemaRefreshInterval + time.Second).UnixNano())
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(keys(), "ms-mcs-admpwd") {
		if time.Now().After(deadline) {
			t.Fatalf("not read again after the interval: %v", keys())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := d.NamedOnlyProperties(); !n["manager"] || !n["ms-mcs-admpwd"] {
		t.Errorf("NamedOnlyProperties after the second read: %v", n)
	}
	// A failing read keeps the set.
	now.Store(start.Add(3 * SchemaRefreshInterval).UnixNano())
	srv.failNext.Store(10)
	keys()
	for d.schema.refreshing.Load() || d.SchemaError() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no failed read reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := keys(); len(got) != 3 {
		t.Errorf("after a failed read: %v, want the three read before", got)
	}
	if got := len(d.DNAttributes()); got != len(wantDN)+1 {
		t.Errorf("after a failed read: %d attributes naming objects, want the %d read before", got, len(wantDN)+1)
	}
}
