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
