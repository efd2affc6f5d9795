package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate/internal/fielderr"
	"github.com/redis/go-redis/v9"
)

// Deletions that must survive a Redis failover (docs/auth.md, "Across a Redis
// failover"). Redis replicates asynchronously: a revocation the primary acknowledged
// may never reach the replica promoted in its place, and the token would work again.
// So a revocation, an ended session and a session's exchange wait until the primary's
// replicas have the deletion (WAIT), and one they do not confirm in time is kept by
// the store that made it: refused there, announced to every other replica's store,
// and deleted again until a primary confirms it.

// confirmingBackend is a Backend whose deletions can be lost to a failover
// (*RedisBackend). The store uses it when the backend offers it.
type confirmingBackend interface {
	// DelConfirmed deletes key and reports whether the replicas confirmed it.
	DelConfirmed(ctx context.Context, key string) (confirmed bool, err error)
	// GetDelConfirmed is GetDel, reporting whether the replicas confirmed the deletion.
	GetDelConfirmed(ctx context.Context, key string) (v string, ok, confirmed bool, err error)
	// Announce tells every store sharing the backend that key stays deleted until exp.
	Announce(ctx context.Context, key string, exp time.Time) error
	// Announcements receives those announcements (this store's own included) until ctx
	// ends; it reconnects by itself.
	Announcements(ctx context.Context) <-chan Announcement
}

// Announcement is a deletion not confirmed by the replicas: key stays refused until
// Expires.
type Announcement struct {
	Key     string
	Expires time.Time
}

// Confirmation is how long and for how many of the primary's replicas a deletion
// waits. cmd/dirgate binds its redis-wait-* settings to it (docs/settings.md).
type Confirmation struct {
	// Replicas must confirm each deletion: at most those the primary has; 0: none.
	Replicas int
	// Timeout bounds the wait.
	Timeout time.Duration
}

// Bounds of a Confirmation; beyond them a setting is a typo, not a choice.
const (
	maxWaitReplicas = 16
	minWaitTimeout  = time.Millisecond
	maxWaitTimeout  = 5 * time.Second
)

// Validate reports every problem of c at once, each a *fielderr.Error naming its
// field.
func (c Confirmation) Validate() error {
	var errs []error
	if c.Replicas < 0 || c.Replicas > maxWaitReplicas {
		errs = append(errs, fielderr.New("Replicas", "must be between 0 and %d", maxWaitReplicas))
	}
	if c.Timeout < minWaitTimeout || c.Timeout > maxWaitTimeout {
		errs = append(errs, fielderr.New("Timeout", "must be between %v and %v", minWaitTimeout, maxWaitTimeout))
	}
	return fielderr.Join(errs...)
}

// SetConfirmation makes deletions wait as c says. Call it before the store is used.
func (b *RedisBackend) SetConfirmation(c Confirmation) {
	b.waitReplicas, b.waitTimeout = c.Replicas, c.Timeout
}

// DelConfirmed deletes key and waits for the replicas.
func (b *RedisBackend) DelConfirmed(ctx context.Context, key string) (bool, error) {
	var confirmed bool
	err := b.onPrimary(ctx, key, func(ctx context.Context, p redis.Pipeliner) { p.Del(ctx, b.prefix+key) },
		func(c bool, _ []redis.Cmder) { confirmed = c })
	return confirmed, err
}

// GetDelConfirmed reads and deletes key at once, and waits for the replicas.
func (b *RedisBackend) GetDelConfirmed(ctx context.Context, key string) (string, bool, bool, error) {
	var v string
	var ok, confirmed bool
	err := b.onPrimary(ctx, key, func(ctx context.Context, p redis.Pipeliner) {
		getDelScript.Eval(ctx, p, []string{b.prefix + key}, MaxRecordBytes)
	}, func(c bool, cmds []redis.Cmder) {
		confirmed = c
		v, _ = cmds[0].(*redis.Cmd).Text()
		ok = v != ""
	})
	return v, ok, confirmed, err
}

// onPrimary sends write and ROLE in one round trip on one connection to key's
// primary, then WAITs on that connection (WAIT covers the writes its own connection
// made) for as many replicas as configured, at most as many as ROLE listed. done
// receives whether they confirmed and write's commands.
func (b *RedisBackend) onPrimary(ctx context.Context, key string, write func(context.Context, redis.Pipeliner), done func(bool, []redis.Cmder)) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout+b.waitTimeout)
	defer cancel()
	node, err := b.primaryFor(ctx, b.prefix+key)
	if err != nil {
		return err
	}
	cn := node.Conn()
	defer cn.Close()
	var role *redis.Cmd
	cmds, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
		write(ctx, p)
		role = p.Do(ctx, "ROLE")
		return nil
	})
	writes := cmds[:len(cmds)-1]
	for _, c := range writes {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	if b.waitReplicas <= 0 {
		done(true, writes)
		return nil
	}
	// Pipelined reports the first command's error, which may be a write's redis.Nil
	// (an unknown or expired key: judged above as no error), not a failure.
	if err != nil && !errors.Is(err, redis.Nil) && role.Err() == nil {
		return err // the connection failed
	}
	if role.Err() != nil {
		// ROLE refused (an ACL without it): the replicas are unknown, so the deletion
		// counts as unconfirmed (kept and retried; docs/operations.md names the commands).
		b.confirmations.Add(false)
		done(false, writes)
		return nil
	}
	want := min(b.waitReplicas, replicasOf(role))
	if want <= 0 {
		done(true, writes)
		return nil
	}
	got, err := cn.Wait(ctx, want, b.waitTimeout).Result()
	if err != nil {
		// WAIT refused or the connection lost after the deletion: unconfirmed.
		b.confirmations.Add(false)
		done(false, writes)
		return nil
	}
	b.confirmations.Add(got >= int64(want))
	done(got >= int64(want), cmds[:len(cmds)-1])
	return nil
}

// primaryFor is the client of the primary holding key: the client itself outside a
// Cluster.
func (b *RedisBackend) primaryFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := b.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("session: confirming a deletion: unsupported Redis client %T", b.client)
}

// replicasOf counts the replicas a primary's ROLE reply lists (0 for anything else:
// a server that is not a primary confirms nothing).
func replicasOf(role *redis.Cmd) int {
	v, err := role.Slice()
	if err != nil || len(v) < 3 || v[0] != "master" {
		return 0
	}
	rs, _ := v[2].([]any)
	return len(rs)
}

// announceChannel is where unconfirmed deletions are announced, under the prefix.
const announceChannel = "revoked"

// Announce publishes "<expiry unix ns> <key>".
func (b *RedisBackend) Announce(ctx context.Context, key string, exp time.Time) error {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.client.Publish(ctx, b.prefix+announceChannel, strconv.FormatInt(exp.UnixNano(), 10)+" "+key).Err()
}

// Announcements subscribes to the channel; go-redis resubscribes after a reconnect.
// Messages that are not well-formed (Redis writers can publish) are dropped.
func (b *RedisBackend) Announcements(ctx context.Context) <-chan Announcement {
	out := make(chan Announcement, 64)
	sub := b.client.Subscribe(ctx, b.prefix+announceChannel)
	go func() {
		defer close(out)
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				if a, ok := parseAnnouncement(m.Payload); ok {
					select {
					case out <- a:
					default: // a full buffer drops it; the deleting store still refuses the key
					}
				}
			}
		}
	}()
	return out
}

// parseAnnouncement reads "<unix ns> <key>", where key is a record name of this
// store ("t:" or "s:" and 64 hex digits).
func parseAnnouncement(s string) (Announcement, bool) {
	ns, key, ok := strings.Cut(s, " ")
	if !ok || len(key) != 66 || key[1] != ':' || (key[0] != 't' && key[0] != 's') {
		return Announcement{}, false
	}
	for _, c := range key[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Announcement{}, false
		}
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n <= 0 {
		return Announcement{}, false
	}
	return Announcement{Key: key, Expires: time.Unix(0, n)}, true
}
