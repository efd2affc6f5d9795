package seal

import (
	"errors"
	"testing"
)

// TestSealOpen: a sealed value opens under its key and secret only.
func TestSealOpen(t *testing.T) {
	s := New([]byte("a secret of at least 32 bytes......"))
	v := s.Seal("k", "blob")
	if b, err := s.Open("k", v); err != nil || b != "blob" {
		t.Fatalf("Open: %q %v", b, err)
	}
	if _, err := s.Open("other", v); !errors.Is(err, ErrMismatch) {
		t.Errorf("moved under another key: %v", err)
	}
	if _, err := New([]byte("another secret of at least 32 bytes")).Open("k", v); !errors.Is(err, ErrMismatch) {
		t.Errorf("another secret: %v", err)
	}
	if _, err := s.Open("k", "blob"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("unsealed: %v", err)
	}
	if _, err := s.Open("k", v[:len(v)-1]+"X"); !errors.Is(err, ErrMismatch) {
		t.Errorf("changed: %v", err)
	}
}

// TestSealHex: the text form opens under its key and secret only.
func TestSealHex(t *testing.T) {
	s := New([]byte("a secret of at least 32 bytes......"))
	v := s.SealHex("k", "id|123")
	if b, err := s.OpenHex("k", v); err != nil || b != "id|123" {
		t.Fatalf("OpenHex: %q %v", b, err)
	}
	if _, err := s.OpenHex("other", v); !errors.Is(err, ErrMismatch) {
		t.Errorf("moved under another key: %v", err)
	}
	if _, err := s.OpenHex("k", "id|124"+v[len("id|123"):]); !errors.Is(err, ErrMismatch) {
		t.Errorf("changed: %v", err)
	}
	for _, bad := range []string{"id", "id|123|zz", ""} {
		if _, err := s.OpenHex("k", bad); !errors.Is(err, ErrNotSealed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := s.VerifyHex("k", "blob", s.HexMAC("k", "blob")); err != nil {
		t.Errorf("VerifyHex: %v", err)
	}
	if err := s.VerifyHex("k", "blob", s.HexMAC("k2", "blob")); !errors.Is(err, ErrMismatch) {
		t.Errorf("VerifyHex of another key's HMAC: %v", err)
	}
}

// TestTextSealer: a text-sealed value opens under its key, label and secret only.
func TestTextSealer(t *testing.T) {
	secret := []byte("a secret of at least 32 bytes......")
	s := NewText(secret, "label")
	v := s.Seal("t:1", `{"a":1}`)
	if b, err := s.Open("t:1", v); err != nil || b != `{"a":1}` {
		t.Fatalf("Open: %q %v", b, err)
	}
	if _, err := s.Open("t:2", v); !errors.Is(err, ErrMismatch) {
		t.Errorf("moved under another key: %v", err)
	}
	if _, err := NewText(secret, "another label").Open("t:1", v); !errors.Is(err, ErrMismatch) {
		t.Errorf("another label: %v", err)
	}
	if _, err := s.Open("t:1", v[:len(v)-2]+"2}"); !errors.Is(err, ErrMismatch) {
		t.Errorf("changed: %v", err)
	}
	for _, bad := range []string{`{"a":1}`, "v2" + v[2:], "v1.!!." + `{"a":1}`} {
		if _, err := s.Open("t:1", bad); !errors.Is(err, ErrNotSealed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestKeysApart: each label, and each framing, gives another HMAC; the key and
// the value cannot trade bytes.
func TestKeysApart(t *testing.T) {
	secret := []byte("a secret of at least 32 bytes......")
	a, b := Derive(secret, "a"), Derive(secret, "b")
	if string(a.Joined("k", "v")) == string(b.Joined("k", "v")) {
		t.Errorf("two labels share a key")
	}
	if string(a.Bound("ab", "c")) == string(a.Bound("a", "bc")) {
		t.Errorf("Bound: a key/blob split collides")
	}
	if string(a.Joined("ab", "c")) == string(a.Joined("a", "bc")) {
		t.Errorf("Joined: a split collides")
	}
}
