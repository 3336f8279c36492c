package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// nodeRetryInterval is how long the commands of a cluster node that could not be reached fail
// at once before one pipeline tries the node again.
const nodeRetryInterval = time.Second

// ErrNodeUnreachable is the error of a read not sent because the cluster node serving its
// keys could not be reached just before.
var ErrNodeUnreachable = errors.New("the Redis Cluster node serving this context could not be reached")

// unreachableNodes keeps a Redis Cluster's unreachable masters from costing the other nodes'
// contexts anything, and has the client follow a failover as soon as the cluster does.
//
// go-redis sends a pipeline to every node it spans at once, but returns only when every node
// has answered; for a node that cannot be reached it tries again up to three times, with
// backoffs, against the same address. So while one master is down, every pipeline that holds
// one of its keys (nearly every coalesced read) waits some 100 ms, and the contexts of every
// other node with it: throughput fell forty-fold in a test with one master of three down. And
// go-redis reloads its slot map only on MOVED or ASK, which a dead node never sends, or once a
// minute: until then it keeps sending a dead master's slots to its address after a replica
// took over.
//
// So after a command fails without a reply from Redis, the slot map is reloaded (in the
// background, one reload at a time), and the node that failed is marked: for
// nodeRetryInterval, reads of its keys fail at once with ErrNodeUnreachable, without being
// sent; then one pipeline tries it again. Once the reload maps the slots to a promoted
// replica, their keys no longer name the marked node and are read at once.
type unreachableNodes struct {
	client *goredis.ClusterClient
	now    func() time.Time

	marked atomic.Int32 // len(until): reads skip all of this while no node is marked
	mu     sync.Mutex
	until  map[string]time.Time // node address -> until when its keys are not sent
}

func newUnreachableNodes(c *goredis.ClusterClient) *unreachableNodes {
	return &unreachableNodes{client: c, now: time.Now, until: make(map[string]time.Time)}
}

// skip returns ErrNodeUnreachable, with the node's address, if a key is served by a node
// marked unreachable; nil when the keys may be sent. A nil receiver (not a cluster) skips
// nothing.
func (u *unreachableNodes) skip(ctx context.Context, keys ...string) error {
	if u == nil || u.marked.Load() == 0 {
		return nil
	}
	for _, k := range keys {
		addr := u.nodeOf(ctx, k)
		u.mu.Lock()
		until, ok := u.until[addr]
		u.mu.Unlock()
		if ok && u.now().Before(until) {
			return fmt.Errorf("%w: %s (tried again every %v)", ErrNodeUnreachable, addr, nodeRetryInterval)
		}
	}
	return nil
}

// observe marks the nodes of the commands that failed without a reply from Redis, unmarks
// those that answered, and reloads the slot map if any failed.
func (u *unreachableNodes) observe(ctx context.Context, cmds []goredis.Cmder) {
	if u == nil {
		return
	}
	failed := false
	for _, c := range cmds {
		if c != nil && unreachable(c.Err()) {
			failed = true
			break
		}
	}
	if !failed && u.marked.Load() == 0 {
		return
	}
	if failed {
		u.client.ReloadState(ctx)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range cmds {
		if c == nil {
			continue
		}
		key, _ := c.Args()[1].(string)
		addr := u.nodeOf(ctx, key)
		if unreachable(c.Err()) {
			u.until[addr] = u.now().Add(nodeRetryInterval)
		} else {
			delete(u.until, addr)
		}
	}
	u.marked.Store(int32(len(u.until)))
}

// nodeOf is the address of the master serving key's slot, as the client's slot map has it.
func (u *unreachableNodes) nodeOf(ctx context.Context, key string) string {
	node, err := u.client.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

// unreachable says whether err is a failure to reach Redis, as opposed to an error reply.
// A caller that gave up, or a pool with no free connection, says nothing of the node.
func unreachable(err error) bool {
	var reply goredis.Error
	return err != nil && !errors.As(err, &reply) && !errors.Is(err, context.Canceled) && !errors.Is(err, goredis.ErrPoolTimeout)
}
