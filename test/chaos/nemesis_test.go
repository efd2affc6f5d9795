package chaos

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/chaos/history"
	"github.com/dirgate/dirgate/test/redistest"
)

// delayLatency is how late the delay-dc fault makes every chunk of a DC's LDAPS
// traffic, each way.
const delayLatency = 300 * time.Millisecond

// nemesis injects and heals the schedule's faults. It runs on the test's goroutine:
// the pair's and Redis's helpers fail the test when a fault cannot be injected or
// healed, which only the test's goroutine may do.
type nemesis struct {
	t   *testing.T
	d   *deployment
	rec *recorder
}

// event is an injection or a heal, in the order the nemesis runs them.
type event struct {
	at   time.Duration
	heal bool
	f    int // index in the schedule's faults
}

// run injects and heals plans at their offsets from start (at once when late), and
// returns when every fault is healed.
func (n *nemesis) run(ctx context.Context, start time.Time, plans []faultPlan) {
	var events []event
	for i, f := range plans {
		events = append(events, event{f.At, false, i}, event{f.At + f.For, true, i})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].heal && !events[j].heal
	})
	ops := map[int]int{}        // fault → its op in the recorder
	targets := map[int]string{} // fault → what the injection hit
	for _, e := range events {
		if !e.heal || ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(start.Add(e.at))):
			}
		}
		f := plans[e.f]
		if !e.heal {
			if ctx.Err() != nil {
				continue
			}
			target := f.Target
			if f.Fault == "kill-feed-leader" {
				if target = n.d.feedLeader(); target == "" {
					n.t.Logf("nemesis: no replica leads the change feed at %v; kill-feed-leader skipped", time.Since(start).Round(time.Millisecond))
					continue
				}
				target = "replica:" + target
			}
			targets[e.f] = target
			ops[e.f] = n.rec.begin(history.Op{Process: "nemesis", Kind: history.Fault, Fault: f.Fault, Targets: []string{target}})
			n.inject(f.Fault, target)
			continue
		}
		i, ok := ops[e.f]
		if !ok {
			continue
		}
		n.heal(f.Fault, targets[e.f])
		n.rec.end(i, nil)
	}
}

func dcNumber(target string) int { k, _ := strconv.Atoi(strings.TrimPrefix(target, "dc")); return k }

func (n *nemesis) inject(fault, target string) {
	t, p := n.t, n.d.pair
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
		n.d.primary.Stop()
	case "stop-redis-replica":
		n.d.replica.Pause()
	case "kill-replica", "kill-feed-leader":
		if err := n.d.kill(strings.TrimPrefix(target, "replica:")); err != nil {
			t.Fatalf("nemesis: %v", err)
		}
	default:
		t.Fatalf("nemesis: unknown fault %q", fault)
	}
}

func (n *nemesis) heal(fault, target string) {
	t, p := n.t, n.d.pair
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
		// one they promoted (or, if they promoted none, it is the primary again).
		n.d.primary.Restart()
		n.settleRedis()
	case "stop-redis-replica":
		n.d.replica.Resume()
		n.settleRedis()
	case "kill-replica", "kill-feed-leader":
		n.d.start(strings.TrimPrefix(target, "replica:"))
	}
}

// settleRedis waits until the Sentinels name a primary among the two servers and
// the other one replicates it, and takes their roles from that. It gives up after a
// minute with a log line (the next Redis fault then hits whichever roles were last
// seen): in outage mode the Sentinels may take longer, and the run goes on.
func (n *nemesis) settleRedis() {
	d := n.d
	servers := []*redistest.Server{d.primary, d.replica}
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
				d.primary, d.replica = s, other
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
