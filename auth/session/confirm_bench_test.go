package session

import (
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRevoke measures a revocation on a real primary: without a replica (only
// ROLE is added), with a replica confirming it (WAIT, the default), and with the
// same replica not waited for (DIRGATE_REDIS_WAIT_REPLICAS=0), in one run, so that
// docs/benchmarks.md ("Redis failovers") gives the wait's cost as a ratio.
func BenchmarkRevoke(b *testing.B) {
	alone := redistest.Start(b)
	primary := redistest.Start(b)
	redistest.StartReplica(b, primary)
	for _, tc := range []struct {
		name     string
		addr     string
		replicas int
	}{
		{"no-replica", alone.Addr(), 1},
		{"replica-wait", primary.Addr(), 1},
		{"replica-nowait", primary.Addr(), 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: tc.addr})
			b.Cleanup(func() { c.Close() })
			be := NewRedisBackend(c, "bench:auth:", time.Second)
			be.SetConfirmation(Confirmation{Replicas: tc.replicas, Timeout: 250 * time.Millisecond})
			s, err := New(Config{Backend: be, Secret: secret})
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.RevokeToken(ctx, "dgt_bench"); err != nil {
					b.Fatal(err)
				}
			}
			if n := s.own.len(); n != 0 {
				b.Fatalf("%d revocations unconfirmed", n)
			}
		})
	}
}
