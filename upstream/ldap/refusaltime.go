package ldap

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dirgate/dirgate/internal/ctxsleep"
)

// refusalTimes makes a name that is no account take as long to refuse as a wrong
// password of a real one (no enumeration of accounts). The DC refuses a bind of a DN
// that no account has in a few milliseconds, but a real account's wrong password
// only after it has recorded the failure (badPwdCount): 14–58% of the time, measured
// against Samba (docs/auth.md, "Unknown users"). So the adapter remembers how long
// its recent wrong-password refusals took, from the start of CheckPassword, and holds
// an unknown name's refusal until a duration drawn from them. Drawn, not averaged,
// so that both answers' times follow one distribution, whatever the DC's load.
type refusalTimes struct {
	mu      sync.Mutex
	samples [64]time.Duration
	n       int // samples recorded, at most len(samples)
	next    int // where the next one goes
}

// refusalFloor is what an unknown name's refusal takes before any wrong password has
// been timed (just after a start): about what one took on the harness DC.
const refusalFloor = 30 * time.Millisecond

// record notes how long a real account's wrong-password refusal took.
func (r *refusalTimes) record(d time.Duration) {
	r.mu.Lock()
	r.samples[r.next] = d
	r.next = (r.next + 1) % len(r.samples)
	r.n = min(r.n+1, len(r.samples))
	r.mu.Unlock()
}

// target is how long an unknown name's refusal should take.
func (r *refusalTimes) target() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return refusalFloor
	}
	return r.samples[rand.IntN(r.n)]
}

// wait holds a refusal that began at start until target has passed, or ctx ends.
func (r *refusalTimes) wait(ctx context.Context, start time.Time) {
	ctxsleep.Sleep(ctx, r.target()-time.Since(start))
}
