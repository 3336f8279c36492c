package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster started by the test on free loopback ports.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n masters with cluster-enabled, joins them with
// "redis-cli --cluster create", and waits until every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartClusterWithReplicas(t, n, 0)
}

// StartClusterWithReplicas starts masters masters with replicas replicas each. A node is
// deemed failed after 2 s without an answer (cluster-node-timeout), so that a replica of a
// killed master is promoted within a few seconds.
func StartClusterWithReplicas(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		unavailable(t, "redis-cli is not installed")
	}
	c := &Cluster{}
	for attempt := 1; ; attempt++ {
		c.Nodes = nil
		for range masters * (1 + replicas) {
			c.Nodes = append(c.Nodes, Start(t,
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"))
		}
		err := c.create(replicas)
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting the cluster again, on other ports", err)
		for _, n := range c.Nodes {
			n.Stop()
		}
	}
	c.WaitOK(t)
	if replicas > 0 {
		c.waitReplicas(t, masters*replicas)
	}
	return c
}

// create joins the nodes into a cluster with redis-cli --cluster create, within 30 s: its
// wait for the nodes to agree never ends when a node of another test's cluster, killed, left
// its address to one of these and its cluster's nodes still gossip to it (tests that run in
// parallel, in one package or two, start and kill clusters on free ports).
func (c *Cluster) create(replicas int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	return nil
}

// URL is the cluster's URL as bigseg takes it (go-redis's ParseClusterURL): its first node's
// address, the others as addr parameters, then params ("read_timeout=1s", ...).
func (c *Cluster) URL(params ...string) string {
	u := "redis://" + c.Nodes[0].Addr() + "?"
	for _, n := range c.Nodes[1:] {
		params = append(params, "addr="+n.Addr())
	}
	return u + strings.Join(params, "&")
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// running are the nodes not stopped.
func (c *Cluster) running() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// WaitOK waits until every running node reports cluster_state:ok and all 16384 slots
// assigned.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				t.Fatalf("cluster not ok after 30s: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling a condition
		}
		cl.Close()
	}
}

// waitReplicas waits until every running node counts n replicas linked to their masters.
func (c *Cluster) waitReplicas(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: node.Addr(), MaxRetries: -1})
		for {
			slots, err := cl.ClusterSlots(context.Background()).Result()
			linked := 0
			for _, s := range slots {
				linked += len(s.Nodes) - 1
			}
			if err == nil && linked >= n && replicasInSync(cl) {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				t.Fatalf("cluster replicas not linked after 30s: %v %v", err, slots)
			}
			time.Sleep(50 * time.Millisecond) // polling a condition
		}
		cl.Close()
	}
}

// replicasInSync says whether the node, if a replica, has its link to its master up.
func replicasInSync(cl *goredis.Client) bool {
	info, err := cl.Info(context.Background(), "replication").Result()
	if err != nil {
		return false
	}
	return !strings.Contains(info, "role:slave") || strings.Contains(info, "master_link_status:up")
}

// MasterOf is the node that serves key's slot as master, as the running nodes see it.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	addr := c.masterAddrOf(t, key)
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}

func (c *Cluster) masterAddrOf(t testing.TB, key string) string {
	t.Helper()
	for _, n := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
		slots, err2 := cl.ClusterSlots(context.Background()).Result()
		cl.Close()
		if err != nil || err2 != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
	}
	return ""
}

// Masters are the running nodes that serve slots as masters.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	var addrs []string
	for _, n := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		slots, err := cl.ClusterSlots(context.Background()).Result()
		cl.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if len(s.Nodes) > 0 && !slices.Contains(addrs, s.Nodes[0].Addr) {
				addrs = append(addrs, s.Nodes[0].Addr)
			}
		}
		break
	}
	var out []*Server
	for _, n := range c.Nodes {
		if slices.Contains(addrs, n.Addr()) {
			out = append(out, n)
		}
	}
	return out
}

// WaitPromoted waits until key's slot is served by a running master other than dead, and
// the cluster is ok again, as every running node sees it: a replica was promoted.
func (c *Cluster) WaitPromoted(t testing.TB, dead *Server, key string) *Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addr := c.masterAddrOf(t, key); addr != "" && addr != dead.Addr() {
			c.WaitOK(t)
			return c.MasterOf(t, key)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica of %s was promoted within 30s", dead.Addr())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// Client returns a cluster client of it, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	cl := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Replace moves master's slots to a new node, as a master's restart on Kubernetes moves them
// to a new address: it starts a node, adds it as master's replica (redis-cli --cluster
// add-node), waits until the replica is in sync, makes it master (CLUSTER FAILOVER) and waits
// until every running node sees it so. The old master is then a replica; Remove takes it out.
func (c *Cluster) Replace(t testing.TB, master *Server) *Server {
	t.Helper()
	id, err := master.Client().ClusterMyID(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	node := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no")
	c.redisCLI(t, "--cluster", "add-node", node.Addr(), master.Addr(), "--cluster-slave", "--cluster-master-id", id)
	c.Nodes = append(c.Nodes, node)
	nc := node.Client()
	c.waitFor(t, "the new node in sync with "+master.Addr(), func() bool {
		info, err := nc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0")
	})
	// A sync can end before gossip has told the others that the node is a replica: its
	// master ignores a failover it asks for until then, and the other masters refuse it
	// their votes.
	c.waitFor(t, node.Addr()+" a replica of "+master.Addr()+" in every node's view", func() bool {
		return c.replicaEverywhere(node.Addr(), id)
	})
	if err := nc.ClusterFailover(context.Background()).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", node.Addr(), err)
	}
	c.waitFor(t, node.Addr()+" master in every node's view", func() bool {
		addrs := c.masterAddrs()
		return slices.Contains(addrs, node.Addr()) && !slices.Contains(addrs, master.Addr())
	})
	c.WaitOK(t)
	return node
}

// replicaEverywhere says whether every running node's CLUSTER NODES has the node at addr as a
// replica of the master whose id is masterID.
func (c *Cluster) replicaEverywhere(addr, masterID string) bool {
	for _, n := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		nodes, err := cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err != nil {
			return false
		}
		found := false
		for line := range strings.Lines(nodes) {
			// <id> <ip:port@cport> <flags> <master id> ...
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasPrefix(f[1], addr+"@") {
				found = strings.Contains(f[2], "slave") && f[3] == masterID
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Remove takes node out of the cluster (redis-cli --cluster del-node: the others forget it)
// and stops it.
func (c *Cluster) Remove(t testing.TB, node *Server) {
	t.Helper()
	id, err := node.Client().ClusterMyID(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var other *Server
	for _, n := range c.running() {
		if n != node {
			other = n
			break
		}
	}
	c.redisCLI(t, "--cluster", "del-node", other.Addr(), id)
	node.Stop()
	c.WaitOK(t)
}

// redisCLI runs redis-cli with args, within 30 s.
func (c *Cluster) redisCLI(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitFor polls cond until it holds, for 30 s at most.
func (c *Cluster) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// masterAddrs are the addresses of the masters serving slots, as every running node sees
// them (nil while the nodes disagree).
func (c *Cluster) masterAddrs() []string {
	var agreed []string
	for i, n := range c.running() {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		slots, err := cl.ClusterSlots(context.Background()).Result()
		cl.Close()
		if err != nil {
			return nil
		}
		var addrs []string
		for _, s := range slots {
			if len(s.Nodes) > 0 && !slices.Contains(addrs, s.Nodes[0].Addr) {
				addrs = append(addrs, s.Nodes[0].Addr)
			}
		}
		slices.Sort(addrs)
		if i > 0 && !slices.Equal(addrs, agreed) {
			return nil
		}
		agreed = addrs
	}
	return agreed
}
