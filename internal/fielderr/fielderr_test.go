package fielderr

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	e := New("AttemptTimeout", "must not exceed {RequestTimeout}, %v (%d%%)", "2s", 5)
	if got, want := e.Error(), "AttemptTimeout: must not exceed RequestTimeout, 2s (5%)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	name := func(f string) string { return strings.ToLower(f) + " (100%)" }
	if got, want := e.Render(name), "attempttimeout (100%): must not exceed requesttimeout (100%), 2s (5%)"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	// A value that looks like a reference is a value: only the format names fields.
	if got, want := New("URL", "%s is not a URL", "{Domain}").Render(name), "url (100%): {Domain} is not a URL"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

func TestUnwrapAndList(t *testing.T) {
	e := New("PasswordFile", "%w", fs.ErrNotExist)
	if !errors.Is(e, fs.ErrNotExist) {
		t.Error("the wrapped error is lost")
	}
	joined := errors.Join(e, errors.Join(New("A", "x"), errors.New("plain")))
	if got := List(joined); len(got) != 3 {
		t.Errorf("List = %v", got)
	}
	if List(nil) != nil {
		t.Error("List(nil) is not nil")
	}
}

// TestJoin: errors come in the order of their fields, each field's in the order
// given; errors without a field first.
func TestJoin(t *testing.T) {
	err := Join(New("PoolSize", "a"), New("BaseDN", "b"), errors.New("plain"), New("BaseDN", "c"))
	if got, want := err.Error(), "plain\nBaseDN: b\nBaseDN: c\nPoolSize: a"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
}
