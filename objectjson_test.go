package dirgate

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// reflectJSON is how Object was encoded before AppendJSON: encoding/json on a copy
// of the struct without its methods, properties {} when nil.
func reflectJSON(t testing.TB, o Object) []byte {
	type plain Object
	if o.Properties == nil {
		o.Properties = map[string][]string{}
	}
	b, err := json.Marshal(plain(o))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkObjectJSON holds AppendJSON, MarshalJSON and json.Marshal (which compacts and
// re-escapes what MarshalJSON returns) to the reflection encoding.
func checkObjectJSON(t testing.TB, o Object) {
	t.Helper()
	want := reflectJSON(t, o)
	if got := o.AppendJSON([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendJSON:\n got %s\nwant prefix%s", got, want)
	}
	got, err := json.Marshal(o)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("json.Marshal: %v\n got %s\nwant %s", err, got, want)
	}
}

func TestObjectAppendJSON(t *testing.T) {
	ts := NewTimestamp(time.Date(2020, 7, 14, 16, 27, 49, 559044800, time.UTC))
	other := NewTimestamp(time.Date(1601, 1, 1, 0, 0, 0, 100, time.FixedZone("x", 3600)))
	for _, o := range []Object{
		{},
		{GUID: "1e72a008-e277-4bfd-812f-2f72c3c885df", DN: "CN=Hugo Helpdesk,OU=IT,DC=corp,DC=com",
			DisplayName: "Hugo Helpdesk", ObjectType: TypeUser, ObjectTypeCode: 2, DomainName: "corp.com",
			DirectoryType: DirectoryTypeActiveDirectory, SID: "S-1-5-21-1-2-3-1104", PrimaryGroupID: 513,
			AccountStatus:  &AccountStatus{IsLocked: true, ExpirationDate: ts},
			PasswordStatus: &PasswordStatus{WhenChanged: other, ExpirationStatus: PasswordExpired}},
		{ObjectTypeCode: -1, AccountStatus: &AccountStatus{IsDisabled: true},
			PasswordStatus: &PasswordStatus{ExpirationDate: ts}},
		// Everything encoding/json escapes: quotes, backslashes, controls with and
		// without short forms, HTML, DEL (not escaped), U+2028/U+2029, invalid UTF-8.
		{DN: "CN=\"q\"\\,x\b\f\n\r\t\x00\x1f\x7f<a&b>\u2028\u2029\xff\xe2\x80,Ünïcödé 😀",
			DisplayName: "\xed\xa0\x80 surrogate", ObjectType: "a\u2027b\u202a"},
		{Properties: map[string][]string{}},
		{Properties: map[string][]string{"mail": {"a@b"}, "b<": nil, "A": {}, "accountexpires": {"never", "x\ny"},
			"\xff": {"\u2028"}, "memberof": {"CN=a,DC=x", "CN=b,DC=x"}}},
	} {
		checkObjectJSON(t, o)
	}
}

// FuzzObjectAppendJSON holds AppendJSON to the reflection encoding for any text in
// any field: a directory's names and attribute values are its users' input.
func FuzzObjectAppendJSON(f *testing.F) {
	f.Add("CN=a<b>&c,DC=x", "a\u2028b\xff", "k", "v\x00", int64(1594744069), int64(559044800), 2, true, false)
	f.Add("", "", "", "", int64(0), int64(0), -1, false, true)
	f.Fuzz(func(t *testing.T, dn, name, key, val string, sec, nsec int64, code int, disabled, nilProps bool) {
		ts := NewTimestamp(time.Unix(sec%(1<<40), nsec%1e9)) // years up to some 35,000, and negative ones
		o := Object{GUID: val, DN: dn, DisplayName: name, ObjectType: key, ObjectTypeCode: code,
			DomainName: dn + name, DirectoryType: code >> 3,
			AccountStatus:  &AccountStatus{IsDisabled: disabled, IsLocked: nilProps, ExpirationDate: ts},
			PasswordStatus: &PasswordStatus{WhenChanged: ts, ExpirationStatus: code}}
		if !nilProps {
			o.Properties = map[string][]string{key: {val, name}, name: nil, dn: {}}
		}
		if disabled {
			o.AccountStatus, o.PasswordStatus.WhenChanged = nil, nil
		}
		checkObjectJSON(t, o)
	})
}

// BenchmarkObjectJSON is the encoding of one listed user: AppendJSON against the
// reflection encoding it replaced.
func BenchmarkObjectJSON(b *testing.B) {
	ts := NewTimestamp(time.Date(2020, 7, 14, 16, 27, 49, 559044800, time.UTC))
	o := Object{GUID: "1e72a008-e277-4bfd-812f-2f72c3c885df", DN: "CN=Load User 12345,OU=Staff,DC=corp,DC=example,DC=com",
		DisplayName: "Load User 12345", ObjectType: TypeUser, ObjectTypeCode: 2, DomainName: "corp.example.com",
		DirectoryType: DirectoryTypeActiveDirectory,
		AccountStatus: &AccountStatus{ExpirationDate: ts}, PasswordStatus: &PasswordStatus{WhenChanged: ts, ExpirationDate: ts}}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = o.AppendJSON(buf[:0])
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reflectJSON(b, o)
		}
	})
}
