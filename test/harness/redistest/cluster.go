package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three primaries, each owning a third of the slots,
// with or without one replica each.
type Cluster struct {
	// Nodes are every node, in the order they were started; which are primaries
	// changes with a failover (Primaries, ReplicaOf).
	Nodes []*Server
}

// StartCluster starts three cluster-enabled servers and joins them with
// redis-cli --cluster create, then waits until every node reports the cluster ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, 0, 2*time.Second)
}

// StartClusterWithReplicas starts six cluster-enabled servers, joins them as three
// primaries with one replica each (redis-cli --cluster create --cluster-replicas 1),
// and waits until every node knows every other, reports the cluster ok, and every
// replica has synchronised. nodeTimeout is cluster-node-timeout: how long a primary
// may be silent before its replica is promoted (the promotion itself takes a
// further second or so).
func StartClusterWithReplicas(t testing.TB, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	return startCluster(t, 1, nodeTimeout)
}

func startCluster(t testing.TB, replicas int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	cli := require(t, "redis-cli")
	c := &Cluster{}
	n := 3 * (1 + replicas)
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.Nodes = append(c.Nodes, newServer(t, dir, []string{
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		}, nil))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(startTimeout)
	for _, node := range c.Nodes {
		for {
			info, err := node.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster not ok within %v: %v %s", startTimeout, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if replicas > 0 {
		for _, node := range c.Nodes {
			if i, err := node.Info("replication"); err == nil && i["role"] == "slave" {
				node.WaitLinkUp(t, time.Until(deadline))
			}
		}
	}
	return c
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Primaries returns the running nodes that report the role master now.
func (c *Cluster) Primaries() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		if i, err := n.Info("replication"); err == nil && i["role"] == "master" {
			out = append(out, n)
		}
	}
	return out
}

// ReplicaOf returns the running node that replicates primary, or nil.
func (c *Cluster) ReplicaOf(primary *Server) *Server {
	for _, n := range c.Nodes {
		if n.cmd == nil || n == primary {
			continue
		}
		i, err := n.Info("replication")
		if err == nil && i["role"] == "slave" && i["master_port"] == strconv.Itoa(primary.port) {
			return n
		}
	}
	return nil
}

// Owner returns the primary that serves key now: the one that answers it rather
// than redirecting (MOVED).
func (c *Cluster) Owner(key string) (*Server, error) {
	for _, n := range c.Primaries() {
		_, err := n.Do("EXISTS", key)
		if err == nil {
			return n, nil
		}
		var reply ReplyError
		if !errors.As(err, &reply) || !strings.HasPrefix(string(reply), "MOVED") {
			return nil, fmt.Errorf("EXISTS %s on %s: %w", key, n.Addr(), err)
		}
	}
	return nil, fmt.Errorf("no primary serves %s", key)
}

// WaitPromoted waits until node reports the role master and every running node
// reports the cluster ok again: after its primary died, the replica node took over
// its slots.
func (c *Cluster) WaitPromoted(t testing.TB, node *Server, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	node.WaitRole(t, "master", limit)
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: node %s does not report the cluster ok %v after the promotion began: %v %s", n.Addr(), limit, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
