package ldap

// The adapter's read of a large group against the same ASQ search by hand, on the
// DC test/harness/samba/large.sh seeds (its env file sourced, inside its namespace):
//
//	ip netns exec dirgate-large bash -c 'set -a; . /tmp/dgl/env; set +a;
//	  go test -run "^$" -bench LargeDCMembers -benchtime 2x -benchmem ./upstream/ldap/'
//
// It skips without DIRGATE_LARGE_OU, also in CI: the large seed takes minutes and is
// never part of make test. The load tool's -dc-large measures the whole first
// listing through dirgate against ldapsearch (docs/benchmarks.md).

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

func BenchmarkLargeDCMembers(b *testing.B) {
	ou := os.Getenv("DIRGATE_LARGE_OU")
	if ou == "" {
		b.Skip("DIRGATE_LARGE_OU not set: start test/harness/samba/large.sh and source its env file")
	}
	dc := sambatest.Env(b)
	// Samba takes tens of seconds to answer 20,000 members on a loaded machine: far
	// beyond the default 10 s of an LDAP call.
	cfg := dcConfig(dc)
	cfg.RequestTimeout = 5 * time.Minute
	d := openDC(b, cfg)
	for _, s := range strings.Split(os.Getenv("DIRGATE_LARGE_SIZES"), ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("DIRGATE_LARGE_SIZES: %v", err)
		}
		dn := "CN=dirgate-large-" + s + "," + ou
		group := mustLookup(b, d, dn)
		b.Run(s+"/adapter", func(b *testing.B) {
			cpu := startCPU(b)
			for b.Loop() {
				objs, err := d.Members(context.Background(), group, nil)
				if err != nil || len(objs) != n {
					b.Fatalf("%d objects, %v; want %d", len(objs), err, n)
				}
			}
			cpu.report(n)
		})
		b.Run(s+"/raw-asq", func(b *testing.B) {
			c := dc.DialService(b)
			c.SetTimeout(5 * time.Minute)
			cpu := startCPU(b)
			for b.Loop() {
				es := rawSearch(b, c, dn, goldap.ScopeBaseObject, "(objectClass=*)", []goldap.Control{asqControl("member")}, 0)
				if len(es) != n {
					b.Fatalf("%d entries, want %d", len(es), n)
				}
			}
			cpu.report(n)
		})
	}
}

// cpuClock reads this process's CPU time (user and system, every thread) over a
// benchmark: on a shared machine the wall time is mostly the DC's and the load's,
// the CPU time is the client's own work.
type cpuClock struct {
	b     *testing.B
	start time.Duration
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) cpuClock { return cpuClock{b, processCPU(b)} }

// report adds the client CPU per listing and per member to the benchmark's line.
func (c cpuClock) report(members int) {
	per := float64(processCPU(c.b)-c.start) / float64(c.b.N)
	c.b.ReportMetric(per/1e6, "cpu-ms/op")
	c.b.ReportMetric(per/1e3/float64(members), "cpu-µs/member")
}
