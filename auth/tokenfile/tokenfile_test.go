package tokenfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

const adminDN = "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com"

func hashOf(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }

// fakeResolver answers for adminDN and counts calls, so caching is observable.
type fakeResolver struct {
	calls atomic.Int32
	err   error
}

func (r *fakeResolver) Principal(_ context.Context, id dirgate.Identifier) (dirgate.Principal, error) {
	r.calls.Add(1)
	if r.err != nil {
		return dirgate.Principal{}, r.err
	}
	if id.Kind() == dirgate.KindDN && id.DN().EqualFold(dirgate.MustParseDN(adminDN)) {
		return dirgate.Principal{DN: adminDN, GUID: "00000000-0000-0000-0000-000000000001"}, nil
	}
	return dirgate.Principal{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    int    // entries
		plain   int    // plain entries
		wantErr string // substring; every problem must be reported
	}{
		// An empty file is an empty list, not an error: the gateway then refuses everyone.
		{name: "empty", yaml: "", want: 0},
		{name: "hashed", yaml: "- sha256: " + hashOf("a") + "\n  subject: " + adminDN + "\n", want: 1},
		{name: "plain counted", yaml: "- token: a\n  subject: S-1-5-21-1-2-3-1105\n", want: 1, plain: 1},
		{name: "hash and plain of one token collide", yaml: "- token: a\n  subject: S-1-5-21-1-2-3-1\n- sha256: " + hashOf("a") + "\n  subject: S-1-5-21-1-2-3-2\n", wantErr: "same token as entry 1"},
		// Both problems appear: one validation reports everything at once.
		{name: "all problems at once", yaml: "- sha256: zz\n  subject: x\n- subject: " + adminDN + "\n", wantErr: "entry 1: sha256 must be 64"},
		{name: "second problem too", yaml: "- sha256: zz\n  subject: x\n- subject: " + adminDN + "\n", wantErr: "entry 2: sha256 or token is required"},
		{name: "bad subject", yaml: "- token: a\n  subject: not-an-id\n", wantErr: "entry 1: subject is not a DN, GUID or SID"},
		// A typo in a key must not silently drop a token's restriction.
		{name: "unknown key", yaml: "- token: a\n  subjet: " + adminDN + "\n", wantErr: "subjet"},
		{name: "both forms", yaml: "- token: a\n  sha256: " + hashOf("a") + "\n  subject: " + adminDN + "\n", wantErr: "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, plain, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want || plain != tt.plain {
				t.Fatalf("got %d entries (%d plain), want %d (%d)", len(got), plain, tt.want, tt.plain)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	r := &fakeResolver{}
	data := "- sha256: " + hashOf("s3cret") + "\n  subject: " + adminDN + "\n" +
		"- token: orphan\n  subject: CN=Gone,DC=corp,DC=example,DC=com\n"
	f, err := Open(Config{Data: []byte(data), Resolver: r, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := f.Authenticate(ctx, "s3cret")
	if err != nil || p.DN != adminDN {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	for _, tok := range []string{"", "S3cret", "s3cret ", strings.Repeat("x", MaxTokenLength+1), "orphan"} {
		_, err := f.Authenticate(ctx, tok)
		if dirgate.ErrorCode(err) != dirgate.EUNAUTHENTICATED {
			t.Errorf("token %.10q: code %q, want unauthenticated", tok, dirgate.ErrorCode(err))
		}
		if msg := dirgate.ErrorMessage(err); msg != "The provided authentication token is either expired or invalid." {
			t.Errorf("token %.10q: message %q", tok, msg)
		}
	}
}

func TestPrincipalCache(t *testing.T) {
	r := &fakeResolver{}
	f, err := Open(Config{Data: []byte("- token: t\n  subject: " + adminDN + "\n"), Resolver: r, Logger: quiet(), PrincipalTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	for range 3 {
		if _, err := f.Authenticate(context.Background(), "t"); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("resolver called %d times within the TTL, want 1", n)
	}
	now = now.Add(2 * time.Minute)
	f.Authenticate(context.Background(), "t")
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("resolver called %d times after the TTL, want 2", n)
	}
}

func TestResolverFailureIsNotUnauthenticated(t *testing.T) {
	// An unreachable directory must surface as an upstream error (502/503), not as a
	// bad token: clients would otherwise discard valid tokens.
	r := &fakeResolver{err: dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("ldap down"))}
	f, _ := Open(Config{Data: []byte("- token: t\n  subject: " + adminDN + "\n"), Resolver: r, Logger: quiet()})
	_, err := f.Authenticate(context.Background(), "t")
	if dirgate.ErrorCode(err) != dirgate.EUPSTREAM {
		t.Fatalf("code %q, want %q", dirgate.ErrorCode(err), dirgate.EUPSTREAM)
	}
}

func TestWatchReloadsAndKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	write := func(s string) {
		// Replace atomically, as editors and Kubernetes do.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("- token: old\n  subject: " + adminDN + "\n")
	f, err := Open(Config{Path: path, Resolver: &fakeResolver{}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 10)
	if err := f.Watch(ctx, func(err error) { reloads <- err }); err != nil {
		t.Fatal(err)
	}
	wait := func() error {
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload seen")
		}
		return nil
	}

	write("- token: new\n  subject: " + adminDN + "\n")
	if err := wait(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if _, err := f.Authenticate(ctx, "new"); err != nil {
		t.Fatalf("new token refused after reload: %v", err)
	}
	if _, err := f.Authenticate(ctx, "old"); err == nil {
		t.Fatal("old token still accepted after reload")
	}

	write("- token: [broken\n")
	if err := wait(); err == nil {
		t.Fatal("broken file reloaded without error")
	}
	if _, err := f.Authenticate(ctx, "new"); err != nil {
		t.Fatalf("last good tokens lost after a broken edit: %v", err)
	}
}

func TestStalePrincipalDuringOutage(t *testing.T) {
	r := &fakeResolver{}
	f, _ := Open(Config{Data: []byte("- token: t\n  subject: " + adminDN + "\n"), Resolver: r, Logger: quiet(),
		PrincipalTTL: time.Minute, PrincipalMaxStale: time.Hour})
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	if _, err := f.Authenticate(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	r.err = dirgate.WrapError(dirgate.EUNAVAILABLE, "", errors.New("breaker open"))
	// Within the staleness bound the last principal stands in, so cached listings can
	// still be served while the directory is down.
	now = now.Add(30 * time.Minute)
	if p, err := f.Authenticate(context.Background(), "t"); err != nil || p.DN != adminDN {
		t.Fatalf("during the outage: %+v, %v", p, err)
	}
	// Beyond it, the outage shows.
	now = now.Add(31 * time.Minute)
	if _, err := f.Authenticate(context.Background(), "t"); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Fatalf("after the staleness bound: %v", err)
	}
	// A subject that is gone is never served stale.
	r.err = dirgate.Errorf(dirgate.ENOTFOUND, "gone")
	now = time.Unix(1000, 0).Add(2 * time.Minute)
	if _, err := f.Authenticate(context.Background(), "t"); dirgate.ErrorCode(err) != dirgate.EUNAUTHENTICATED {
		t.Fatalf("deleted subject: %v", err)
	}
}

// TestExpire: a principal the change feed names is resolved again on its next use;
// others stay cached; an expired principal still stands in while the directory fails.
func TestExpire(t *testing.T) {
	r := &fakeResolver{}
	f, err := Open(Config{Data: []byte("- token: t\n  subject: " + adminDN + "\n"), Resolver: r, Logger: quiet(),
		PrincipalTTL: time.Hour, PrincipalMaxStale: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.Authenticate(ctx, "t")
	f.Expire(func(p dirgate.Principal) bool { return p.GUID == "someone else" })
	f.Authenticate(ctx, "t")
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("resolver called %d times, want 1", n)
	}
	f.Expire(func(p dirgate.Principal) bool { return p.DN == adminDN })
	f.Authenticate(ctx, "t")
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("resolver called %d times after Expire, want 2", n)
	}
	f.Expire(func(dirgate.Principal) bool { return true })
	r.err = dirgate.Errorf(dirgate.EUNAVAILABLE, "down")
	if p, err := f.Authenticate(ctx, "t"); err != nil || p.DN != adminDN {
		t.Fatalf("expired principal not used while the directory fails: %v", err)
	}
}

// blockingResolver answers once released, counting the reads.
type blockingResolver struct {
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (r *blockingResolver) Principal(context.Context, dirgate.Identifier) (dirgate.Principal, error) {
	r.calls.Add(1)
	r.started <- struct{}{}
	<-r.release
	return dirgate.Principal{DN: adminDN, GUID: "00000000-0000-0000-0000-000000000001"}, nil
}

// TestResolutionShared: requests that need a subject's principal while it is being
// read share the read (whenever each arrives: before the read ends it joins it,
// after, the principal is cached).
func TestResolutionShared(t *testing.T) {
	r := &blockingResolver{started: make(chan struct{}, 10), release: make(chan struct{})}
	f := openBlocking(t, r)
	var wg sync.WaitGroup
	authN(t, f, &wg, 8)
	<-r.started
	close(r.release)
	wg.Wait()
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("%d reads for 8 concurrent requests, want 1", n)
	}
}

// TestResolutionAfterExpire: a request after an Expire does not join a read that
// started before it, and only the later read's principal is kept.
func TestResolutionAfterExpire(t *testing.T) {
	r := &blockingResolver{started: make(chan struct{}, 10), release: make(chan struct{})}
	f := openBlocking(t, r)
	var wg sync.WaitGroup
	authN(t, f, &wg, 1)
	<-r.started
	f.Expire(func(dirgate.Principal) bool { return true })
	authN(t, f, &wg, 1)
	select {
	case <-r.started:
	case <-time.After(30 * time.Second): // a deadline against hanging, not a measurement
		t.Fatal("the request after Expire joined the read that started before it")
	}
	close(r.release)
	wg.Wait()
	authN(t, f, &wg, 1)
	wg.Wait()
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (the second one's principal kept)", n)
	}
}

func openBlocking(t *testing.T, r *blockingResolver) *File {
	t.Helper()
	f, err := Open(Config{Data: []byte("- token: t\n  subject: " + adminDN + "\n"), Resolver: r, Logger: quiet(), PrincipalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// authN authenticates n times at once.
func authN(t *testing.T, f *File, wg *sync.WaitGroup, n int) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.Authenticate(context.Background(), "t"); err != nil {
				t.Error(err)
			}
		}()
	}
}
