package redisconn

import (
	"bufio"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// History notices when Redis's history changed under dirgate: a primary that serves
// under a new replication ID continuing one that dirgate saw before (a replica
// promoted by Sentinel or by a Cluster failover, a managed service's switch-over).
// Replication is asynchronous, so such a primary may lack writes its predecessor
// acknowledged: version tokens, announcements, revocations. The cache and the session
// store that share a History distrust what Redis holds when Gen changes
// (docs/cache.md, "Redis failovers").
//
// Every connection a client with this History opens asks its server for INFO
// replication before its first command (Config.History installs the hook), so no
// reply from a promoted primary reaches dirgate before Gen has changed. A History is
// shared by every client of one deployment: the cache's and the session store's.
//
// What it cannot see: a primary that goes back in time under the replication ID it
// had (a restart from an older snapshot that kept its ID), and a failover of a Cluster
// shard whose earlier primary this process never talked to.
type History struct {
	mu    sync.Mutex
	known map[string]bool // replication IDs seen on primaries
	gen   atomic.Uint64
	subs  []chan struct{}
	log   *slog.Logger

	infoRefused atomic.Bool // INFO was refused (an ACL user without it): logged once

	changes metric.Int64Counter
}

// NewHistory returns a History that logs to log (nil: slog.Default()).
func NewHistory(log *slog.Logger) *History {
	if log == nil {
		log = slog.Default()
	}
	changes, _ := otel.Meter("github.com/dirgate/dirgate/redisconn").Int64Counter("dirgate_redis_history_changes",
		metric.WithDescription("Times a Redis primary was found serving a history that continues an earlier primary's (a failover that may have lost writes); the cache and the session store then distrusted what Redis held."))
	changes.Add(context.Background(), 0) // from 0: an alert sees the first increase
	return &History{known: map[string]bool{}, log: log, changes: changes}
}

// Gen counts the history changes seen so far. Whoever read Redis between two reads
// of Gen that differ may have read a history that lost writes.
func (h *History) Gen() uint64 {
	if h == nil {
		return 0
	}
	return h.gen.Load()
}

// Subscribe returns a channel that receives a value (coalesced) after each change.
func (h *History) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	if h == nil {
		return ch
	}
	h.mu.Lock()
	h.subs = append(h.subs, ch)
	h.mu.Unlock()
	return ch
}

// OnConnect is the clients' OnConnect hook (Config.History installs it): it reads
// the server's replication state on the new connection. It never fails the
// connection: a server that refuses INFO leaves failovers undetected (logged once).
func (h *History) OnConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "replication").Result()
	if err != nil {
		if strings.Contains(err.Error(), "NOPERM") && !h.infoRefused.Swap(true) {
			h.log.Warn("redis: INFO is refused to dirgate's user; a failover that loses writes cannot be detected (docs/cache.md, \"Redis failovers\")", "error", err)
		}
		return nil
	}
	h.observe(cn.String(), parseReplication(info))
	return nil
}

// replication is what observe needs of INFO replication.
type replication struct {
	role, replID, replID2 string
}

// noReplID is the replication ID INFO shows for none (a primary that never
// continued another's history).
const noReplID = "0000000000000000000000000000000000000000"

func parseReplication(info string) replication {
	var r replication
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			r.role = v
		case "master_replid":
			r.replID = v
		case "master_replid2":
			r.replID2 = v
		}
	}
	return r
}

// observe records a primary's replication IDs. A new ID whose second ID is one seen
// before is a history change: that primary continues a history dirgate knew, from an
// offset that may be earlier than the writes it acknowledged. A new ID without a known
// second one is a primary met for the first time (or one restarted empty, whose lost
// keys the cache's random tokens and the lease's incarnation already cover).
func (h *History) observe(conn string, r replication) {
	if r.role != "master" || r.replID == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known[r.replID] {
		return
	}
	h.known[r.replID] = true
	if r.replID2 == "" || r.replID2 == noReplID || !h.known[r.replID2] {
		return
	}
	// Before the hook returns, so before any command on this connection is sent.
	h.gen.Add(1)
	h.changes.Add(context.Background(), 1)
	h.log.Warn("redis: history changed: a primary continues an earlier primary's history and may lack writes it acknowledged; the cache distrusts everything it holds, revocations not confirmed by a replica are applied again",
		"conn", conn, "replid", r.replID, "previous_replid", r.replID2)
	for _, ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
