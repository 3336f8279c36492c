package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/segments"
)

// failoverRecovery is how soon after a replica's promotion bigseg must answer again for every
// context, and be ready: the bound the README states for a Cluster failover.
const failoverRecovery = 5 * time.Second

// failoverUsers is the number of contexts the failover tests look up, spread over every slot
// range.
const failoverUsers = 300

func failoverRefs(i int) string { return "seg-" + strconv.Itoa(i%7) + ".g1" }

// seedCluster writes failoverUsers contexts under prefix, and metadata.
func seedCluster(t testing.TB, c *goredis.ClusterClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	for i := range failoverUsers {
		key := prefix + ":big_segment_include:" + segments.Hash("user-"+strconv.Itoa(i))
		if err := c.SAdd(ctx, key, failoverRefs(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, prefix+":big_segments_synchronized_on", strconv.FormatInt(time.Now().UnixMilli(), 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, prefix+":big_segments_cursor", "c1", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// lookupLoad is lookups of random contexts, by several clients at once, until stopped: what
// they were answered, counted, and any answer that was not what Redis holds.
type lookupLoad struct {
	base  string
	stop  chan struct{}
	wg    sync.WaitGroup
	ok    atomic.Int64
	fail  atomic.Int64
	wrong atomic.Int64
	// skip, when set, marks the contexts whose answers liveOK does not count.
	skip             map[int]bool
	liveOK, liveFail atomic.Int64
	mu               sync.Mutex
	wrongs           []string
}

// startLookupLoad starts clients clients; skip is as lookupLoad.skip.
func startLookupLoad(base string, clients int, skip map[int]bool) *lookupLoad {
	l := &lookupLoad{base: base, stop: make(chan struct{}), skip: skip}
	for range clients {
		l.wg.Go(func() {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer hc.CloseIdleConnections()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				i := rand.IntN(failoverUsers)
				code, got, err := lookupUser(hc, base, i)
				switch {
				case err != nil || code != http.StatusOK:
					l.fail.Add(1)
					if !l.skip[i] {
						l.liveFail.Add(1)
					}
				case len(got) != 1 || !got[failoverRefs(i)]:
					l.wrong.Add(1)
					l.mu.Lock()
					l.wrongs = append(l.wrongs, fmt.Sprintf("user-%d: %v", i, got))
					l.mu.Unlock()
				default:
					l.ok.Add(1)
					if !l.skip[i] {
						l.liveOK.Add(1)
					}
				}
			}
		})
	}
	return l
}

func (l *lookupLoad) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if l.wrong.Load() > 0 {
		t.Errorf("%d wrong answers, such as %v", l.wrong.Load(), l.wrongs[:min(3, len(l.wrongs))])
	}
}

func lookupUser(hc *http.Client, base string, i int) (int, map[string]bool, error) {
	resp, err := hc.Get(base + "/memberships/user-" + strconv.Itoa(i))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Memberships map[string]bool
		Status      string
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode == http.StatusOK && body.Status != "HEALTHY" {
		return 0, nil, fmt.Errorf("status %s", body.Status)
	}
	return resp.StatusCode, body.Memberships, nil
}

// allAnswered says whether every context is answered, healthy and right, and /readyz is 200.
func allAnswered(hc *http.Client, base string) bool {
	resp, err := hc.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	for i := range failoverUsers {
		if code, got, err := lookupUser(hc, base, i); err != nil || code != http.StatusOK || !got[failoverRefs(i)] {
			return false
		}
	}
	return true
}

// TestClusterFailover kills, under lookup load, a master whose replica the cluster promotes:
// first one that holds no metadata key, then one that holds one. Each time bigseg must answer
// every context and be ready again within failoverRecovery of the promotion, and never give a
// wrong answer.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a six-node cluster and waits for two failovers")
	}
	cluster := redistest.StartClusterWithReplicas(t, 3, 1)
	prefix := "bigsegfailover"
	seedCluster(t, cluster.Client(t), prefix)
	srv := start(t, map[string]string{
		"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0], "BIGSEG_PREFIX": prefix, "BIGSEG_CACHE_SIZE": "0",
		"BIGSEG_LOG_LEVEL": "info",
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	waitFor(t, "every context answered before the kill", func() bool { return allAnswered(hc, srv.URL) })

	plain := masterWithoutMetadata(t, cluster, prefix)
	for _, step := range []struct {
		name   string
		victim func() *redistest.Server
	}{
		{"master holding no metadata", func() *redistest.Server { return plain }},
		{"master holding metadata", func() *redistest.Server { return cluster.MasterOf(t, prefix+":big_segments_synchronized_on") }},
	} {
		victim := step.victim()
		victimKey := keyServedBy(t, cluster, prefix, victim)
		load := startLookupLoad(srv.URL, 8, nil)
		waitFor(t, "lookups under load", func() bool { return load.ok.Load() > 100 })
		victim.Stop()
		killed := time.Now()
		promoted := cluster.WaitPromoted(t, victim, victimKey)
		promotedAt := time.Now()
		deadline := promotedAt.Add(failoverRecovery)
		for !allAnswered(hc, srv.URL) {
			if time.Now().After(deadline) {
				load.end(t)
				t.Fatalf("%s: not every context answered, or not ready, %v after the promotion of %s", step.name, failoverRecovery, promoted.Addr())
			}
			time.Sleep(20 * time.Millisecond) // polling a condition
		}
		load.end(t)
		t.Logf("%s: killed %s, promoted %s after %v, all answered %v after that; answers: %d ok, %d failed",
			step.name, victim.Addr(), promoted.Addr(), promotedAt.Sub(killed).Round(time.Millisecond),
			time.Since(promotedAt).Round(time.Millisecond), load.ok.Load(), load.fail.Load())
	}
}

// masterWithoutMetadata is a master that holds neither metadata key under prefix.
func masterWithoutMetadata(t testing.TB, cluster *redistest.Cluster, prefix string) *redistest.Server {
	t.Helper()
	holders := map[*redistest.Server]bool{}
	for _, k := range []string{prefix + ":big_segments_synchronized_on", prefix + ":big_segments_cursor"} {
		holders[cluster.MasterOf(t, k)] = true
	}
	for _, m := range cluster.Masters(t) {
		if !holders[m] {
			return m
		}
	}
	t.Fatal("every master holds a metadata key")
	return nil
}

// keyServedBy is an include key of one of the failover users that node serves.
func keyServedBy(t *testing.T, cluster *redistest.Cluster, prefix string, node *redistest.Server) string {
	t.Helper()
	for i := range failoverUsers {
		if k := prefix + ":big_segment_include:" + segments.Hash("user-"+strconv.Itoa(i)); cluster.MasterOf(t, k) == node {
			return k
		}
	}
	t.Fatalf("no user's key is on %s", node.Addr())
	return ""
}

// TestClusterMasterDownCostsOnlyItsContexts kills a master that has no replica, under lookup
// load: while it is down, every context whose sets are on the other masters is answered, and
// every context with a set on the dead one is a 503, never a wrong or empty answer.
func TestClusterMasterDownCostsOnlyItsContexts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster and kills a node")
	}
	cluster := redistest.StartCluster(t, 3)
	prefix := "bigsegnodedown"
	seedCluster(t, cluster.Client(t), prefix)
	srv := start(t, map[string]string{
		"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0], "BIGSEG_PREFIX": prefix, "BIGSEG_CACHE_SIZE": "0",
		"BIGSEG_LOG_LEVEL": "info",
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	waitFor(t, "every context answered before the kill", func() bool { return allAnswered(hc, srv.URL) })
	victim := masterWithoutMetadata(t, cluster, prefix)
	onVictim := map[int]bool{}
	for i := range failoverUsers {
		h := segments.Hash("user-" + strconv.Itoa(i))
		onVictim[i] = cluster.MasterOf(t, prefix+":big_segment_include:"+h) == victim ||
			cluster.MasterOf(t, prefix+":big_segment_exclude:"+h) == victim
	}
	victim.Stop()
	var answered, refused, failedElsewhere, answeredOnDead int
	for range 5 {
		for i := range failoverUsers {
			code, got, err := lookupUser(hc, srv.URL, i)
			switch {
			case err != nil:
				t.Fatalf("user-%d: %v", i, err)
			case code == http.StatusOK && !got[failoverRefs(i)]:
				t.Fatalf("user-%d: wrong answer %v", i, got)
			case code == http.StatusOK && onVictim[i]:
				answeredOnDead++
			case code == http.StatusOK:
				answered++
			case onVictim[i]:
				refused++
			default:
				failedElsewhere++
			}
		}
	}
	t.Logf("with %s down: %d answers of the other masters' contexts, %d of its contexts refused", victim.Addr(), answered, refused)
	if failedElsewhere > 0 || answeredOnDead > 0 || answered == 0 || refused == 0 {
		t.Errorf("with a master down: %d lookups of contexts on live masters failed, %d of contexts on the dead one were answered; %d and %d the other way",
			failedElsewhere, answeredOnDead, answered, refused)
	}
}

// TestClusterUnansweringMasterCostsOnlyItsContexts makes a master that holds no metadata key
// stop answering, under lookup load on the real program: hung with its connections open
// (CLIENT PAUSE), its process stopped (SIGSTOP), then killed. Each way, no lookup of a context
// whose keys are all on the other masters may fail, the faulty master's contexts must be
// refused, and once it answers again every context is answered.
func TestClusterUnansweringMasterCostsOnlyItsContexts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster and stops a node")
	}
	cluster := redistest.StartCluster(t, 3)
	prefix := "bigseghung"
	seedCluster(t, cluster.Client(t), prefix)
	srv := startProcess(t, map[string]string{
		"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0], "BIGSEG_PREFIX": prefix, "BIGSEG_CACHE_SIZE": "0",
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	victim := masterWithoutMetadata(t, cluster, prefix)
	onVictim := map[int]bool{}
	for i := range failoverUsers {
		h := segments.Hash("user-" + strconv.Itoa(i))
		onVictim[i] = cluster.MasterOf(t, prefix+":big_segment_include:"+h) == victim ||
			cluster.MasterOf(t, prefix+":big_segment_exclude:"+h) == victim
	}
	const faultFor = 2500 * time.Millisecond
	pause := func() {
		c := victim.Client()
		defer c.Close()
		// Longer than the load: it ends by itself, and the test waits for its end.
		if err := c.Do(context.Background(), "CLIENT", "PAUSE", (faultFor + time.Second).Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, fault := range []struct {
		name       string
		start, end func()
		comesBack  bool
	}{
		{"hung (CLIENT PAUSE)", pause, func() {}, true},
		{"stopped (SIGSTOP)", victim.Freeze, victim.Thaw, true},
		{"killed", victim.Stop, func() {}, false},
	} {
		t.Run(fault.name, func(t *testing.T) {
			waitFor(t, "every context answered", func() bool { return allAnswered(hc, srv.URL) })
			fault.start()
			load := startLookupLoad(srv.URL, 8, onVictim)
			time.Sleep(faultFor) // the load's duration, not a synchronization
			load.end(t)
			fault.end()
			live := load.liveOK.Load() + load.liveFail.Load()
			refused := load.fail.Load() - load.liveFail.Load()
			t.Logf("%d lookups of live masters' contexts, %d failed; %d of the faulty master's refused", live, load.liveFail.Load(), refused)
			if load.liveFail.Load() > 0 || live == 0 || refused == 0 {
				t.Errorf("with a master %s: %d of %d lookups of contexts on live masters failed; %d of its own contexts refused",
					fault.name, load.liveFail.Load(), live, refused)
			}
			if fault.comesBack {
				waitFor(t, "every context answered once it is back", func() bool { return allAnswered(hc, srv.URL) })
			}
		})
	}
}

// TestClusterShortPauseCostsNoAnswer pauses a master that holds no metadata key (CLIENT PAUSE,
// as a fork for BGSAVE or a slow command stalls a master), five times, for 3/5 of the Redis read
// timeout (300 ms of the default 500 ms; here both three times longer, so that a busy machine's
// delays stay far from the timeout), under lookups of the real program that arrive at a steady
// rate whatever the lookups before them are doing, with read slots to spare (as several
// environments, or a higher BIGSEG_STORE_READS_IN_FLIGHT, have). A pause shorter than the read
// timeout answers every read in time: no lookup may fail, the paused master's contexts included.
func TestClusterShortPauseCostsNoAnswer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster and pauses a node")
	}
	const readTimeout, pauses = 1500 * time.Millisecond, 5
	const pause = readTimeout * 3 / 5
	cluster := redistest.StartCluster(t, 3)
	prefix := "bigsegpause"
	seedCluster(t, cluster.Client(t), prefix)
	srv := startProcess(t, map[string]string{
		"BIGSEG_REDIS_CLUSTER_URL": "redis://" + cluster.Addrs()[0] + "?read_timeout=" + readTimeout.String(),
		"BIGSEG_PREFIX":            prefix, "BIGSEG_CACHE_SIZE": "0", "BIGSEG_LOOKUP_TIMEOUT": (2 * readTimeout).String(),
		"BIGSEG_STORE_READS_IN_FLIGHT": "64",
	})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	defer hc.CloseIdleConnections()
	waitFor(t, "every context answered", func() bool { return allAnswered(hc, srv.URL) })
	victim := masterWithoutMetadata(t, cluster, prefix).Client()
	var lookups, failed, wrong atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond) // the load's rate, not a synchronization
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				i := rand.IntN(failoverUsers)
				code, got, err := lookupUser(hc, srv.URL, i)
				switch {
				case err != nil || code != http.StatusOK:
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("user-%d: %d %v", i, code, err))
				case len(got) != 1 || !got[failoverRefs(i)]:
					wrong.Add(1)
				}
				lookups.Add(1)
			})
		}
	})
	ctx := context.Background()
	for range pauses {
		before := lookups.Load()
		waitFor(t, "lookups between pauses", func() bool { return lookups.Load() >= before+20 })
		if err := victim.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		if err := victim.Ping(ctx).Err(); err != nil { // answered once the pause is over
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d lookups with %d pauses of %v: %d failed, %d wrong", lookups.Load(), pauses, pause, failed.Load(), wrong.Load())
	if failed.Load() > 0 || wrong.Load() > 0 {
		t.Errorf("%d lookups failed and %d were wrong across %d pauses of %v, below the read timeout (%v); first failure %v",
			failed.Load(), wrong.Load(), pauses, pause, readTimeout, firstFailure.Load())
	}
}
