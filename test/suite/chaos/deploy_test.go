package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bundled "github.com/dirgate/dirgate/rego"
	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// masterName is the name the Sentinels give the Redis primary.
const masterName = "dirgate-chaos"

// principalTTL is DIRGATE_PRINCIPAL_TTL: how long a token's principal (its account
// state included) is reused, the bound on a disable reaching a token when the change
// feed misses it (docs/auth.md, "How a token is checked").
const principalTTL = 15 * time.Second

// dirgateTimeout is DIRGATE_REQUEST_TIMEOUT: dirgate answers every request within it
// (504 at the latest), and a write whose answer was lost took effect, if at all,
// within it (history.Config.MaxRequest).
const dirgateTimeout = 8 * time.Second

// requestTimeout bounds each request of the suite's clients: longer than
// dirgateTimeout, so that a request left without an answer is dirgate's failure to
// keep its own deadline, not the client's impatience.
const requestTimeout = dirgateTimeout + 2*time.Second

// replicaNames are the dirgate replicas, in the order the workload picks them.
var replicaNames = []string{"A", "B"}

// deployment is what the suite runs against: the pair's two DCs, a Redis primary
// with one replica watched by three Sentinels (quorum two), and two dirgate replicas
// in Sentinel mode with both DCs, DC1 preferred.
type deployment struct {
	t    *testing.T
	pair sambatest.Pair
	env  map[string]string // every replica's settings, for restarts

	sentinels []*redistest.Server

	mu               sync.Mutex
	primary, replica *redistest.Server         // their roles as the nemesis last saw them settle
	base             map[string]string         // replica name → its current (or last) API base URL
	live             map[string]*child.Program // replica name → the running process; absent while killed
	all              []started                 // every process started, for the logs and the race check
}

type started struct {
	name string
	p    *child.Program
}

// startDeployment starts Redis and the replicas; callers are the tokens-file tokens
// and the accounts they act as, trustees every account the policy lets view,
// remove and add in ou.
func startDeployment(t *testing.T, pair sambatest.Pair, ou string, trustees []string, tokens map[string]string) *deployment {
	t.Helper()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	opts := redistest.FastFailover
	opts.Quorum = 2
	var sentinels []*redistest.Server
	var addrs []string
	for range 3 {
		s := redistest.StartSentinelWith(t, primary, masterName, opts)
		sentinels = append(sentinels, s)
		addrs = append(addrs, s.Addr())
	}
	for _, s := range sentinels {
		s.WaitSentinelPeers(t, masterName, 2, 60*time.Second)
		s.WaitSentinelReplicas(t, masterName, 1, 60*time.Second)
	}

	policyDir := filepath.Join(t.TempDir(), "policy")
	if err := os.Mkdir(policyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := bundled.WriteWithRoles(policyDir, map[string]any{"name": "chaos",
		"trustees": trustees, "permissions": []string{"view", "remove", "add"},
		"scopes": []any{map[string]string{"subtree": ou}}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DIRGATE_UPSTREAM":             "ldap",
		"DIRGATE_LDAP_URL":             pair.URL(1) + " " + pair.URL(2),
		"DIRGATE_LDAP_BIND_DN":         pair.BindDN,
		"DIRGATE_LDAP_PASSWORD_FILE":   child.WriteFile(t, "ldap-password", pair.Password),
		"DIRGATE_LDAP_BASE_DN":         pair.BaseDN,
		"DIRGATE_LDAP_CA_FILE":         pair.CAFile,
		"DIRGATE_LDAP_HEALTH_INTERVAL": "5s",
		"DIRGATE_TOKENS_FILE":          child.WriteTokens(t, tokens),
		"DIRGATE_POLICY_DIR":           policyDir,
		"DIRGATE_DECISION_LOG":         "off",
		"DIRGATE_PRINCIPAL_TTL":        principalTTL.String(),
		"DIRGATE_REQUEST_TIMEOUT":      dirgateTimeout.String(),
		// The suite uses revoked tokens on purpose; the failure throttle would turn
		// their 401 into 429 after ten, which says nothing about revocation (10000 is
		// the largest it takes).
		"DIRGATE_AUTH_MAX_FAILURES":    "10000",
		"DIRGATE_REDIS_MODE":           "sentinel",
		"DIRGATE_REDIS_ADDR":           strings.Join(addrs, ","),
		"DIRGATE_REDIS_MASTER_NAME":    masterName,
		"DIRGATE_REDIS_RETRY_INTERVAL": "250ms",
		"DIRGATE_SECRET_FILE":          child.WriteFile(t, "secret", "the chaos suite's secret, 32 bytes or more\n"),
	}
	d := &deployment{t: t, pair: pair, env: env, primary: primary, replica: replica, sentinels: sentinels,
		base: map[string]string{}, live: map[string]*child.Program{}}
	for _, name := range replicaNames {
		d.start(t, name)
	}
	// The replicas run with the race detector when the suite does: a race found in
	// them under faults fails the test, with the report.
	t.Cleanup(func() {
		for _, s := range d.all {
			err := s.p.Stop()
			_, stderr := s.p.Output(t)
			if i := bytes.Index(stderr, []byte("WARNING: DATA RACE")); i >= 0 {
				t.Errorf("replica %s (exit: %v) reported a data race:\n%s", s.name, err, stderr[i:min(len(stderr), i+6000)])
			}
		}
	})
	return d
}

// start starts replica name (again), on new ports; t is the test, or a fault's
// view of it (laneTB).
func (d *deployment) start(t testing.TB, name string) {
	t.Helper()
	p := child.Start(t, d.env)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.base[name] = p.Base
	d.live[name] = p
	d.all = append(d.all, started{name, p})
}

// kill crashes replica name with SIGKILL and waits until it is gone; its base URL
// stays, so requests sent to it meet a refused connection, as a client's would.
func (d *deployment) kill(name string) error {
	d.mu.Lock()
	p := d.live[name]
	delete(d.live, name)
	d.mu.Unlock()
	if p == nil {
		return fmt.Errorf("replica %s is not running", name)
	}
	if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill replica %s: %w", name, err)
	}
	_ = p.Stop() // waits for the exit
	return nil
}

// redisRoles returns the Redis servers as the primary and the replica, as last seen.
func (d *deployment) redisRoles() (primary, replica *redistest.Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.primary, d.replica
}

func (d *deployment) setRedisRoles(primary, replica *redistest.Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.primary, d.replica = primary, replica
}

// baseURL returns replica name's API base URL.
func (d *deployment) baseURL(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.base[name]
}

// root is a base URL up to /api, under which the sign-in flow lives.
func root(base string) string { return strings.TrimSuffix(base, "/api/directoryObjects/groupMembers") }

// feedLeader returns the running replica that reads the change feed
// (dirgate_changefeed_leader 1, changefeed/metrics.go), or "" when none says so.
func (d *deployment) feedLeader() string {
	d.mu.Lock()
	live := make(map[string]*child.Program, len(d.live))
	for k, v := range d.live {
		live[k] = v
	}
	d.mu.Unlock()
	for _, name := range replicaNames {
		p := live[name]
		if p == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := p.Metrics(ctx)
		cancel()
		if err != nil {
			continue
		}
		for k, v := range m {
			if (k == "dirgate_changefeed_leader" || strings.HasPrefix(k, "dirgate_changefeed_leader{")) && v == 1 {
				return name
			}
		}
	}
	return ""
}

// writeLogs writes every replica process's standard error to dir, one file each
// (A-1.log, B-1.log, A-2.log after a restart, …), for reading after a run.
func (d *deployment) writeLogs(dir string) {
	d.t.Helper()
	n := map[string]int{}
	for _, s := range d.all {
		n[s.name]++
		_, stderr := s.p.Output(d.t)
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.log", s.name, n[s.name]))
		if err := os.WriteFile(path, stderr, 0o600); err != nil {
			d.t.Errorf("write %s: %v", path, err)
		}
	}
}

// newHTTPClient returns a client whose every request ends within requestTimeout.
func newHTTPClient() *child.Client {
	return &child.Client{HTTP: &http.Client{Timeout: requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}}
}
