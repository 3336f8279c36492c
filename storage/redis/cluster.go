package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/segments"
)

// nodeRetryInterval is how long the commands of a cluster node found down fail at once before
// one read (a probe) tries the node again.
const nodeRetryInterval = time.Second

// forgetDownAfter is how long past its retry time a master found down is remembered once the
// slot map no longer has it: the nodes' views of the slot map differ for a while after a
// failover, and a reload from a node that has not seen it yet could map slots to the dead
// master again.
const forgetDownAfter = time.Minute

// ErrNodeUnreachable is the error of a read not sent because the cluster node serving its
// keys was found down (it could not be reached, or stopped answering) just before.
var ErrNodeUnreachable = errors.New("the Redis Cluster node serving this context could not be reached")

// clusterNodes keeps a Redis Cluster master that is dead, or hung, from costing the other
// masters' contexts anything, and has the client follow a failover as soon as the cluster does.
//
// go-redis sends a pipeline to every node it spans at once, but returns only when every node
// has answered or timed out (and retries a node that timed out). So one master that stops
// answering would hold every read that holds one of its keys (nearly every coalesced read) for
// its timeouts, the contexts of the live masters with it, and fill the service's read slots.
// And go-redis reloads its slot map only on MOVED or ASK, which a dead node never sends, or once
// a minute: until then it keeps sending a dead master's slots to its address after a replica
// took over.
//
// So:
//   - a read sends one pipeline per master, each bounded by the client's read timeout as a
//     whole (retries included), so a master that does not answer costs a read at most that,
//     and fails only its own contexts;
//   - a master is down once a pipeline to it fails without a reply from Redis (refused, reset,
//     timed out), or once it has had a pipeline in flight for the read timeout without
//     answering any (which finds it hung even when the reads' own deadline, shorter than the
//     read timeout, ends them first). Never sooner: a master that stalls for less than the
//     read timeout (a fork for BGSAVE, a slow command) answers every read sent meanwhile in
//     time, and costs none;
//   - the keys of a down master fail at once with ErrNodeUnreachable, without being sent; every
//     nodeRetryInterval one read tries it (the probe: one at a time, never several), and the
//     first pipeline it answers makes it up again;
//   - a failure without a reply reloads the slot map (in the background: go-redis reloads
//     lazily, one reload at a time). Once the reload maps the slots to a promoted replica, their
//     keys no longer name the down master and are read at once;
//   - a master's state is forgotten once the slot map no longer has it (see prune): on
//     Kubernetes a master's address changes at every restart or failover.
type clusterNodes struct {
	client *goredis.ClusterClient
	budget time.Duration // how long one master's pipeline may take: the client's read timeout

	mu    sync.Mutex
	nodes map[string]*nodeState // by address
	added bool                  // an address was added to nodes since the last prune
}

// nodeState is what reads have seen of one master.
type nodeState struct {
	key      string    // the first key read from it: if the slot map no longer has it there, it is gone
	inflight int       // pipelines sent and not yet answered
	progress time.Time // when it last answered, or was sent a pipeline while idle
	down     bool
	retryAt  time.Time // when a down node may be probed
	probing  bool      // a probe is in flight
}

func newClusterNodes(c *goredis.ClusterClient) *clusterNodes {
	return &clusterNodes{client: c, budget: cmp.Or(c.Options().ReadTimeout, DefaultReadTimeout), nodes: make(map[string]*nodeState)}
}

// nodeRead is one master's part of a read: its keys, in one pipeline.
type nodeRead struct {
	addr  string
	node  *goredis.Client // nil when the slot map has no master for the keys yet
	probe bool
	err   error // not sent: ErrNodeUnreachable
	keys  []string
	at    []int // index of each key's command in the read
	// set by readNode:
	execErr error
	ran     bool // a command has an error of its own: the pipeline was sent
}

// admit decides whether a read may send keys to the master at addr, now; each admitted
// nodeRead must end with done.
func (n *clusterNodes) admit(addr, key string, now time.Time) *nodeRead {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.state(addr, key)
	if !st.down && st.inflight > 0 && now.Sub(st.progress) >= n.budget {
		st.record(unreachable, now)
	}
	g := &nodeRead{addr: addr}
	if st.down {
		if st.probing || now.Before(st.retryAt) {
			g.err = fmt.Errorf("%w: %s (tried again every %v)", ErrNodeUnreachable, addr, nodeRetryInterval)
			return g
		}
		st.probing, g.probe = true, true
	}
	if st.inflight == 0 {
		st.progress = now
	}
	st.inflight++
	return g
}

// outcome is what a pipeline tells of its node.
type outcome int

const (
	unknown     outcome = iota // nothing: its caller gave up, or the pool had no connection
	answered                   // Redis replied, errors included
	unreachable                // no reply from Redis
)

// done records the outcome of an admitted nodeRead; a node that could not be reached is down,
// and the slot map is reloaded.
func (n *clusterNodes) done(ctx context.Context, g *nodeRead, o outcome, now time.Time) {
	n.mu.Lock()
	st := n.nodes[g.addr]
	st.inflight--
	if g.probe {
		st.probing = false
	}
	st.record(o, now)
	n.mu.Unlock()
	if o == unreachable {
		n.client.ReloadState(ctx)
	}
}

// record makes the outcome of a pipeline the node's state: up once it answered, down once it
// could not be reached.
func (st *nodeState) record(o outcome, now time.Time) {
	switch o {
	case answered:
		st.progress, st.down = now, false
	case unreachable:
		st.down, st.retryAt = true, now.Add(nodeRetryInterval)
	}
}

// state is the node at addr's state, made on first use (by a read of key); n.mu must be held.
func (n *clusterNodes) state(addr, key string) *nodeState {
	st := n.nodes[addr]
	if st == nil {
		st = &nodeState{key: key}
		n.nodes[addr] = st
		n.added = true
	}
	return st
}

// prune forgets the masters that the client's slot map no longer has (whose first key it maps
// to another address), once an address was added (a new master, so perhaps one gone): nodes
// then holds the current masters and those found down lately, not every address a master
// ever had. It is called by the status poll, not by lookups.
//
// Forgetting a master that is up and has no pipeline in flight loses nothing: its next read
// finds it as it would a new one. One whose first key's slot moved to another master (a
// resharding) may be forgotten while it still serves others: that costs nothing either.
func (n *clusterNodes) prune(ctx context.Context, now time.Time) {
	n.mu.Lock()
	if !n.added {
		n.mu.Unlock()
		return
	}
	n.added = false
	keys := make(map[string]string, len(n.nodes))
	for addr, st := range n.nodes {
		keys[addr] = st.key
	}
	n.mu.Unlock()
	gone := map[string]bool{}
	for addr, key := range keys { // without n.mu: the slot map may have to be read
		gone[addr] = n.nodeOf(ctx, key) != addr
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forget(gone, now)
}

// forget deletes the state of every address in gone, unless a pipeline to it is in flight
// (done needs its state) or it was found down lately; n.mu must be held.
func (n *clusterNodes) forget(gone map[string]bool, now time.Time) {
	maps.DeleteFunc(n.nodes, func(addr string, st *nodeState) bool {
		downLately := st.down && now.Before(st.retryAt.Add(forgetDownAfter))
		return gone[addr] && st.inflight == 0 && !downLately
	})
}

// observe records what the commands of a pipeline sent across nodes (the status poll's) tell
// of each node, without admission: the poll always reads, so it also sees a node come back.
// Then it prunes the masters gone.
func (n *clusterNodes) observe(ctx context.Context, cmds []goredis.Cmder) {
	if n == nil {
		return
	}
	by, keys := map[string]outcome{}, map[string]string{}
	for _, c := range cmds {
		key, _ := c.Args()[1].(string)
		addr := n.nodeOf(ctx, key)
		by[addr], keys[addr] = max(by[addr], outcomeOf(c.Err())), key
	}
	now, reload := time.Now(), false
	n.mu.Lock()
	for addr, o := range by {
		n.state(addr, keys[addr]).record(o, now)
		reload = reload || o == unreachable
	}
	n.mu.Unlock()
	if reload {
		n.client.ReloadState(ctx)
	}
	n.prune(ctx, now)
}

// nodeOf is the address of the master serving key's slot, as the client's slot map has it.
func (n *clusterNodes) nodeOf(ctx context.Context, key string) string {
	if node := n.masterOf(ctx, key); node != nil {
		return node.Options().Addr
	}
	return ""
}

// masterOf is the client of the master serving key's slot; nil if the slot map has none.
func (n *clusterNodes) masterOf(ctx context.Context, key string) *goredis.Client {
	node, err := n.client.MasterForKey(ctx, key)
	if err != nil {
		return nil
	}
	return node
}

// outcomeOf is what a command's error tells of its node. A caller that gave up, or a pool with
// no free connection, says nothing of the node.
func outcomeOf(err error) outcome {
	var reply goredis.Error
	switch {
	case err == nil || errors.As(err, &reply):
		return answered
	case errors.Is(err, context.Canceled) || errors.Is(err, goredis.ErrPoolTimeout):
		return unknown
	}
	return unreachable
}

// clusterMemberships is Memberships on a cluster: one pipeline per master, each bounded by the
// read timeout, the masters found down skipped (see clusterNodes).
func (s *Store) clusterMemberships(ctx context.Context, hashes []string) []segments.Read {
	n := s.nodes
	reads := make([]segments.Read, len(hashes))
	cmds := make([]*goredis.StringSliceCmd, 2*len(hashes))
	groups := make(map[string]*nodeRead, 4)
	now := time.Now()
	for i, h := range hashes {
		keys := [2]string{s.IncludeKey(h), s.ExcludeKey(h)}
		var gs [2]*nodeRead
		for k, key := range keys {
			node := n.masterOf(ctx, key)
			addr := ""
			if node != nil {
				addr = node.Options().Addr
			}
			if gs[k] = groups[addr]; gs[k] == nil {
				gs[k] = n.admit(addr, key, now)
				gs[k].node = node
				groups[addr] = gs[k]
			}
		}
		if err := cmp.Or(gs[0].err, gs[1].err); err != nil {
			reads[i].Err = err
			continue
		}
		for k, g := range gs {
			g.keys, g.at = append(g.keys, keys[k]), append(g.at, 2*i+k)
		}
	}
	var wg sync.WaitGroup
	var last *nodeRead
	for _, g := range groups {
		switch {
		case g.err != nil:
		case len(g.keys) == 0: // admitted, but each of its contexts has a key on a down node
			n.done(ctx, g, unknown, now)
		case last == nil:
			last = g
		default:
			wg.Go(func() { s.readNode(ctx, g, cmds) })
		}
	}
	if last != nil {
		s.readNode(ctx, last, cmds)
	}
	wg.Wait()
	for _, g := range groups {
		if g.execErr != nil && !g.ran {
			for _, j := range g.at { // the pipeline never ran: its empty results mean nothing
				cmds[j].SetErr(fmt.Errorf("pipeline: %w", g.execErr))
			}
		}
	}
	for i := range hashes {
		if reads[i].Err == nil {
			reads[i] = membershipOf(cmds[2*i], cmds[2*i+1])
		}
	}
	return reads
}

// readNode sends g's keys to its master in one pipeline, within the read timeout: straight
// to the node's own client, which saves the cluster pipeline's routing of every command, its
// goroutine and a copy of the commands. Keys that have moved to another node since the slot
// map was read (MOVED, ASK: a resharding) are read again through the cluster client, which
// follows redirections.
func (s *Store) readNode(parent context.Context, g *nodeRead, cmds []*goredis.StringSliceCmd) {
	ctx, cancel := context.WithTimeout(parent, s.nodes.budget)
	defer cancel()
	var pipe goredis.Pipeliner
	if g.node != nil {
		pipe = g.node.Pipeline()
	} else {
		pipe = s.client.Pipeline()
	}
	for j, key := range g.keys {
		cmds[g.at[j]] = pipe.SMembers(ctx, key)
	}
	_, g.execErr = pipe.Exec(ctx)
	if g.node != nil {
		s.followRedirects(ctx, g, cmds)
	}
	o := unknown
	for _, j := range g.at {
		err := cmds[j].Err()
		o, g.ran = max(o, outcomeOf(err)), g.ran || err != nil
	}
	switch {
	case g.execErr != nil && !g.ran:
		o = unknown // Exec failed before sending (a rejected password): nothing is known of the node
	case o == unreachable && parent.Err() != nil:
		o = unknown // the read's own deadline passed, not the node's budget
	}
	s.nodes.done(ctx, g, o, time.Now())
}

// followRedirects reads again, through the cluster client, the keys of g that its node said
// are served elsewhere, and has the slot map reloaded.
func (s *Store) followRedirects(ctx context.Context, g *nodeRead, cmds []*goredis.StringSliceCmd) {
	var moved []int
	for j, at := range g.at {
		if err := cmds[at].Err(); goredis.HasErrorPrefix(err, "MOVED") || goredis.HasErrorPrefix(err, "ASK") {
			moved = append(moved, j)
		}
	}
	if len(moved) == 0 {
		return
	}
	s.nodes.client.ReloadState(ctx)
	pipe := s.client.Pipeline()
	for _, j := range moved {
		cmds[g.at[j]] = pipe.SMembers(ctx, g.keys[j])
	}
	if _, err := pipe.Exec(ctx); err == nil {
		g.execErr = nil
	}
}
