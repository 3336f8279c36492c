package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelSet is a master, one replica and one sentinel watching them, started by the test.
type SentinelSet struct {
	MasterName string
	Master     *Server
	Replica    *Server
	Sentinel   *Server
}

// StartSentinel starts a master, a replica of it and a sentinel monitoring it under
// masterName (quorum 1, down after 1s), and waits until the replica is in sync and the
// sentinel sees it.
func StartSentinel(t testing.TB, masterName string) *SentinelSet {
	t.Helper()
	s := &SentinelSet{MasterName: masterName}
	s.Master = Start(t)
	s.Replica = Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port), "--replica-announce-ip", "127.0.0.1")
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 5000\n"+
		"sentinel parallel-syncs %[1]s 1\n", masterName, s.Master.Port)
	s.Sentinel = StartWith(t, Options{Sentinel: true, Conf: conf})

	sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.Sentinel.Addr()})
	defer sc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		replicas, err := sc.Replicas(context.Background(), masterName).Result()
		if err == nil && len(replicas) == 1 && !strings.Contains(fmt.Sprint(replicas[0]), "disconnected") &&
			strings.Contains(fmt.Sprint(replicas[0]), "master-link-status:ok") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel does not see an in-sync replica after 30s: %v %v", replicas, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}

// MasterAddr asks the sentinel which server is the master now.
// URL is the set's URL as bigseg takes it (go-redis's ParseFailoverURL): the sentinel's
// address and the master's name, then params ("read_timeout=1s", ...).
func (s *SentinelSet) URL(params ...string) string {
	return "redis://" + s.Sentinel.Addr() + "?" + strings.Join(append([]string{"master_name=" + s.MasterName}, params...), "&")
}

func (s *SentinelSet) MasterAddr(t testing.TB) string {
	t.Helper()
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.Sentinel.Addr()})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(context.Background(), s.MasterName).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(addr, ":")
}

// Failover forces a failover (SENTINEL FAILOVER) and waits until the sentinel names the
// former replica as master.
func (s *SentinelSet) Failover(t testing.TB) {
	t.Helper()
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.Sentinel.Addr()})
	defer sc.Close()
	if err := sc.Failover(context.Background(), s.MasterName).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.MasterAddr(t) != s.Replica.Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("master still %s 30s after SENTINEL FAILOVER", s.MasterAddr(t))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}
