package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/suite/chaos/history"
)

// delayLatency is how late the delay-dc fault makes every chunk of a DC's LDAPS
// traffic, each way: a 200 ms round trip, a DC in a distant site. A new connection
// (TLS, bind, a read) then takes about four round trips, within dirgate's default
// dial timeout of 2 s; at 300 ms each way it did not, and a delayed DC behaved as
// one that is down (docs/directory.md, "Several domain controllers").
const delayLatency = 100 * time.Millisecond

// nemesis injects and heals the schedule's faults, each in a goroutine of its own,
// so that a slow heal (a DC's start takes seconds) does not hold back the next fault.
// A fault whose time has come waits while the faults actually active forbid it
// (allowed, in the run's mode): a heal that ran late must not let two faults the
// mode keeps apart overlap.
type nemesis struct {
	t    *testing.T
	d    *deployment
	rec  *recorder
	mode string

	mu     sync.Mutex
	cond   *sync.Cond
	active map[int]faultPlan // injected and not yet healed, by index in the plan
}

// laneTB is the test as the pair's helpers see it from a fault's goroutine: where
// they would fail the test at once (FailNow, which only the test's goroutine may
// call), it panics with the message, which the goroutine recovers and reports.
type laneTB struct{ testing.TB }

type laneFatal string

func (l laneTB) Fatal(args ...any)                 { panic(laneFatal(fmt.Sprint(args...))) }
func (l laneTB) Fatalf(format string, args ...any) { panic(laneFatal(fmt.Sprintf(format, args...))) }
func (l laneTB) FailNow()                          { panic(laneFatal("FailNow")) }

// run injects and heals plans at their offsets from start and returns when every
// fault injected is healed. Injections stop when ctx is done; heals do not.
func (n *nemesis) run(ctx context.Context, start time.Time, plans []faultPlan) {
	n.cond = sync.NewCond(&n.mu)
	n.active = map[int]faultPlan{}
	var wg sync.WaitGroup
	for i, f := range plans {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					msg, ok := r.(laneFatal)
					if !ok {
						panic(r)
					}
					n.t.Errorf("nemesis: %s %s: %s", f.Fault, f.Target, msg)
				}
			}()
			n.lane(ctx, start, i, f)
		})
	}
	wg.Wait()
}

// lane is one fault's life: wait for its time and for the faults it must not
// overlap, inject, wait for its end, heal.
func (n *nemesis) lane(ctx context.Context, start time.Time, i int, f faultPlan) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(start.Add(f.At))):
	}
	n.mu.Lock()
	for !allowed(f, slices.Collect(maps.Values(n.active)), n.mode) {
		n.cond.Wait()
	}
	target := f.Target
	if f.Fault == "kill-feed-leader" {
		if target = n.d.feedLeader(); target == "" {
			n.mu.Unlock()
			n.t.Logf("nemesis: no replica leads the change feed at %v; kill-feed-leader skipped", time.Since(start).Round(time.Millisecond))
			return
		}
		target = "replica:" + target
	}
	f.Target = target
	n.active[i] = f
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.active, i)
		n.cond.Broadcast()
		n.mu.Unlock()
	}()
	op := n.rec.begin(history.Op{Process: "nemesis", Kind: history.Fault, Fault: f.Fault, Targets: []string{target}})
	// The Redis server hit is fixed at the injection: a settling of another Redis
	// fault may swap the roles meanwhile.
	primary, replica := n.d.redisRoles()
	redis := map[string]*redistest.Server{"redis-primary": primary, "redis-replica": replica}[target]
	// A fault that could not be injected may still have half happened: it is healed
	// all the same, and its op keeps no end.
	injected := false
	defer func() {
		if !injected {
			n.heal(f.Fault, target, redis)
		}
	}()
	n.inject(f.Fault, target, redis)
	injected = true
	time.Sleep(time.Until(start.Add(f.At + f.For)))
	n.heal(f.Fault, target, redis)
	n.rec.end(op, nil)
	if f.Target == "redis-primary" || f.Target == "redis-replica" {
		n.settleRedis()
	}
}

func dcNumber(target string) int { k, _ := strconv.Atoi(strings.TrimPrefix(target, "dc")); return k }

// inject injects fault on target; redis is the Redis server target names.
func (n *nemesis) inject(fault, target string, redis *redistest.Server) {
	t, p := laneTB{n.t}, n.d.pair
	switch fault {
	case "kill-dc":
		p.Kill(t, dcNumber(target))
	case "blackhole-dc":
		p.LinkDown(t, dcNumber(target))
	case "pause-inbound":
		p.PauseInbound(t, dcNumber(target))
	case "delay-dc":
		p.Delay(t, dcNumber(target), delayLatency)
	case "kill-redis-primary":
		redis.Stop()
	case "stop-redis-replica":
		redis.Pause()
	case "kill-replica", "kill-feed-leader":
		if err := n.d.kill(strings.TrimPrefix(target, "replica:")); err != nil {
			t.Fatalf("%v", err)
		}
	default:
		t.Fatalf("unknown fault %q", fault)
	}
}

// heal undoes inject.
func (n *nemesis) heal(fault, target string, redis *redistest.Server) {
	t, p := laneTB{n.t}, n.d.pair
	switch fault {
	case "kill-dc":
		p.Start(t, dcNumber(target))
	case "blackhole-dc":
		p.LinkUp(t, dcNumber(target))
	case "pause-inbound":
		p.ResumeInbound(t, dcNumber(target))
	case "delay-dc":
		p.Undelay(t, dcNumber(target))
	case "kill-redis-primary":
		// The old primary comes back empty; the Sentinels make it a replica of the
		// one they promoted (or, if they promoted none, it is the primary again):
		// settleRedis, after the fault's end, waits for that.
		redis.Restart()
	case "stop-redis-replica":
		redis.Resume()
	case "kill-replica", "kill-feed-leader":
		n.d.start(t, strings.TrimPrefix(target, "replica:"))
	}
}

// settleRedis waits until the Sentinels name a primary among the two servers and
// the other one replicates it, and takes their roles from that; a killed primary's
// return as a replica takes about 10 s (a Sentinel converts a returning old primary
// only after it has reported its role for 8 s). It gives up after a minute with a
// log line (the next Redis fault then hits the roles last seen): in outage mode the
// Sentinels may take longer, and the run goes on.
func (n *nemesis) settleRedis() {
	d := n.d
	primary, replica := d.redisRoles()
	servers := []*redistest.Server{primary, replica}
	start := time.Now()
	for deadline := start.Add(time.Minute); ; {
		addr, err := d.sentinels[0].SentinelPrimary(masterName)
		for i, s := range servers {
			other := servers[1-i]
			if err != nil || s.Addr() != addr {
				continue
			}
			if info, err := other.Info("replication"); err == nil && info["role"] == "slave" &&
				info["master_port"] == strconv.Itoa(s.Port()) && info["master_link_status"] == "up" {
				d.setRedisRoles(s, other)
				n.t.Logf("nemesis: Redis settled in %v: primary %s, replica %s", time.Since(start).Round(time.Millisecond), s.Addr(), other.Addr())
				return
			}
		}
		if time.Now().After(deadline) {
			n.t.Logf("nemesis: Redis did not settle within a minute (the Sentinels give %s, %v); roles kept", addr, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
