package failover

import (
	"testing"
	"time"
)

// otherDCLatency is how late the relay of pair.sh delay makes every chunk of the
// surviving DC's LDAPS, each way: the chaos suite's delay-dc fault.
const otherDCLatency = 100 * time.Millisecond

// TestPreferredDCKilledOtherDelayed kills the preferred DC while the only other one
// answers 100 ms late each way, and then brings it back, under load: every call
// lands on the slow DC at once (its pool, the change feed, the health checks and
// the listings whose cache entries the DC switch invalidated). No request may fail
// or take over 5 s, neither after the kill nor while DC1 returns.
func TestPreferredDCKilledOtherDelayed(t *testing.T) {
	cl := startCluster(t)
	all := newGroups(t, cl.pair, []string{"slow one", smith, quoted, hashUser, contact, pc},
		[]string{"slow two", smith, zoe})
	warm(t, cl, all...)
	cl.pair.Delay(t, 2, otherDCLatency)

	rec, at := underLoad(t, cl, all, func(made func()) { cl.pair.Kill(t, 1); made() }, 3*loadAfterFault)
	rec.check(t, "DC1 killed under load while DC2 answers 100 ms late", at)

	rec, at = underLoad(t, cl, all, func(made func()) { cl.pair.Start(t, 1); made() }, 3*loadAfterFault)
	rec.check(t, "DC1 back under load while DC2 answers 100 ms late", at)
}
