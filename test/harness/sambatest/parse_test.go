package sambatest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The helpers below read fixture files and SIDs for TestHarness; a bug in
// them would make TestHarness check the wrong thing, so they get their own
// tests that run without a DC.

func TestRID(t *testing.T) {
	tests := []struct {
		name    string
		sid     []byte
		want    uint32
		wantErr bool
	}{
		// S-1-5-21-508194244-2207095322-3016344161-1104: five sub-authorities.
		{name: "domain account", sid: []byte{1, 5, 0, 0, 0, 0, 0, 5, 0x15, 0, 0, 0, 0xc4, 0x6d, 0x4a, 0x1e,
			0x1a, 0x3b, 0x8e, 0x83, 0x61, 0xb0, 0xa9, 0xb3, 0x50, 0x04, 0, 0}, want: 1104},
		// S-1-5-32-544 (Administrators): two sub-authorities.
		{name: "builtin", sid: []byte{1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0, 0x20, 0x02, 0, 0}, want: 544},
		// The count byte says 5 sub-authorities but the bytes hold 4.
		{name: "truncated", sid: []byte{1, 5, 0, 0, 0, 0, 0, 5, 0x15, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, wantErr: true},
		// No sub-authority means no RID.
		{name: "no sub-authority", sid: []byte{1, 0, 0, 0, 0, 0, 0, 5}, wantErr: true},
		// An absent attribute arrives as nil.
		{name: "empty", sid: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rid(tt.sid)
			if (err != nil) != tt.wantErr {
				t.Fatalf("rid() err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("rid() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLDIFDNs(t *testing.T) {
	tests := []struct {
		name string
		ldif string
		want []string
	}{
		// Plain records, comments and other attributes are ignored.
		{name: "plain", ldif: "# c\ndn: CN=a,DC=x\nobjectClass: user\n\ndn: CN=b,DC=x\ncn: b\n",
			want: []string{"CN=a,DC=x", "CN=b,DC=x"}},
		// Non-ASCII DNs are often base64-encoded (dn::).
		{name: "base64", ldif: "dn:: Q049WsO2ZSxEQz14\n", want: []string{"CN=Zöe,DC=x"}},
		// Long lines are folded: a leading space continues the previous line.
		{name: "folded", ldif: "dn: CN=long,OU=a\n b,DC=x\nobjectClass: top\n", want: []string{"CN=long,OU=ab,DC=x"}},
		// "dn" inside a value or another attribute name is no record start.
		{name: "not a dn line", ldif: "dn: CN=a,DC=x\ndescription: dn: fake\nmember: CN=b\n", want: []string{"CN=a,DC=x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.ldif")
			if err := os.WriteFile(p, []byte(tt.ldif), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ldifDNs(p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ldifDNs() = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := ldifDNs(filepath.Join(t.TempDir(), "missing.ldif")); err == nil {
		t.Error("ldifDNs(missing file) succeeded, want an error")
	}
}
