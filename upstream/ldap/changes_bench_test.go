package ldap

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	goldap "github.com/go-ldap/ldap/v3"
)

// countingConn counts the searches sent to the server.
type countingConn struct {
	conn
	n *atomic.Int64
}

func (c countingConn) SearchAsync(ctx context.Context, req *goldap.SearchRequest, size int) goldap.Response {
	c.n.Add(1)
	return c.conn.SearchAsync(ctx, req, size)
}

// BenchmarkReadChangesIdle is the change feed's steady-state cost on the DC: one read
// while nothing (or little: the DC is shared) changes. It reports the searches each
// read sends; at the default interval of 1 s a deployment sends 60 reads a minute.
//
//	go test -run '^$' -bench ReadChangesIdle ./upstream/ldap/
func BenchmarkReadChangesIdle(b *testing.B) {
	dc := sambatest.Env(b)
	d := openDC(b, dcConfig(dc))
	var n atomic.Int64
	for len(d.servers()[0].pool.idle) > 0 {
		_ = (<-d.servers()[0].pool.idle).Close()
	}
	dial := d.servers()[0].pool.dial
	d.servers()[0].pool.dial = func(ctx context.Context) (conn, error) {
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return countingConn{conn: c, n: &n}, nil
	}
	ctx := context.Background()
	bt, err := d.ReadChanges(ctx, dirgate.ChangePosition{}, DefaultPageSize)
	if err != nil {
		b.Fatal(err)
	}
	d.tombstoneLifetime(ctx) // read once per process, not per read
	pos := bt.Position
	n.Store(0)
	changed := 0
	b.ResetTimer()
	for range b.N {
		bt, err := d.ReadChanges(ctx, pos, 100000)
		if err != nil {
			b.Fatal(err)
		}
		changed += len(bt.Changes)
		pos = bt.Position
	}
	b.StopTimer()
	b.ReportMetric(float64(n.Load())/float64(b.N), "searches/read")
	b.ReportMetric(float64(changed)/float64(b.N), "changes/read")
}
