package explain

import (
	"context"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestDraftsOneAtATime: while a draft holds the slot, another is refused with
// tooManyRequests before any work.
func TestDraftsOneAtATime(t *testing.T) {
	d := New(nil, nil, true, nil)
	d.draftSlot <- struct{}{}
	_, err := d.Decisions(context.Background(), dirgate.Principal{}, dirgate.DecisionsQuery{Draft: "package x"})
	if dirgate.ErrorCode(err) != dirgate.ETOOMANY {
		t.Fatalf("second draft: %v, want %s", err, dirgate.ETOOMANY)
	}
}
