// Package ctxsleep waits for a duration without outliving the request that waits.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends if that comes first: how dirgate holds an
// answer back (a failed authentication, a refusal timed like another) without
// keeping a request whose client went away.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
