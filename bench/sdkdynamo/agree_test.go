package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
)

// requireMoto starts moto_server for t, stopped when t ends; without it on PATH the test
// skips, or fails with BIGSEG_TEST_REQUIRE_DYNAMODB=1 (which .ci/run sets).
func requireMoto(t *testing.T) *moto {
	t.Helper()
	m, err := startMoto()
	if err != nil {
		if os.Getenv("BIGSEG_TEST_REQUIRE_DYNAMODB") == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v; set BIGSEG_TEST_REQUIRE_DYNAMODB=1 to fail instead", err)
	}
	t.Cleanup(m.stop)
	return m
}

// env is what the end-to-end tests run: moto with a table of the population's data written
// the Relay Proxy's way, and bigseg on it.
type env struct {
	moto     *moto
	table    string
	bigseg   *proc
	flagFile string
}

func setUp(t *testing.T, pop []member) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{moto: requireMoto(t)}
	dir := t.TempDir()
	bin, err := buildBigseg(ctx, "../..", dir)
	if err != nil {
		t.Fatal(err)
	}
	e.flagFile = filepath.Join(dir, "flags.json")
	if err := os.WriteFile(e.flagFile, []byte(flagData), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newDynamoClient(e.moto.url, nil)
	if e.table, err = createTable(ctx, c, "agree"); err != nil {
		t.Fatal(err)
	}
	if err := patch(ctx, c, e.table, "", "v1", time.Now().UnixMilli(), changes(nil, pop)); err != nil {
		t.Fatal(err)
	}
	settings := append(awsVars(e.moto.url, dir), "BIGSEG_DYNAMODB_TABLE="+e.table, "BIGSEG_STATUS_POLL_INTERVAL=100ms",
		"BIGSEG_LOOKUP_TIMEOUT=10s") // a correctness test on a shared machine: moto may be slow, never wrong
	if e.bigseg, err = startBigseg(ctx, bin, nil, dir, settings...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.bigseg.stop)
	return e
}

// sdks are SDK clients of both ways, with the SDK's cache on (a short TTL, so that a patch
// shows soon) and off; closed when the test ends.
func (e *env) sdks(t *testing.T) []namedSDK {
	t.Helper()
	var out []namedSDK
	for _, cache := range []sdkCache{{ttl: 50 * time.Millisecond, statusPoll: 100 * time.Millisecond}, {off: true, statusPoll: 100 * time.Millisecond}} {
		for _, way := range []string{viaDynamo, viaBigseg} {
			store := dynamoStore(e.table, newDynamoClient(e.moto.url, nil))
			if way == viaBigseg {
				store = redisStore(e.bigseg.resp)
			}
			client, counted, err := newSDK(store, cache, e.flagFile)
			if err != nil {
				t.Fatalf("%s: %v", way, err)
			}
			t.Cleanup(func() { client.Close() })
			out = append(out, namedSDK{name: fmt.Sprintf("%s, SDK cache off %v", way, cache.off), client: client, store: counted})
		}
	}
	return out
}

type namedSDK struct {
	name   string
	client *ldclient.LDClient
	store  *countingStore
}

// disagreements evaluates the flag for every context of pop with every SDK (the SDKs at once)
// and describes each answer that is not pop's, or whose Big Segments status is not HEALTHY,
// at most max of them for each SDK.
func disagreements(sdks []namedSDK, pop []member, max int) []string {
	found := make([][]string, len(sdks))
	var wg sync.WaitGroup
	for i, s := range sdks {
		wg.Go(func() {
			for _, m := range pop {
				v, d, err := s.client.StringVariationDetail(flagKey, m.context(), "default")
				if err != nil || v != m.want() || d.Reason.GetBigSegmentsStatus() != ldreason.BigSegmentsHealthy {
					found[i] = append(found[i], fmt.Sprintf("%s: %q evaluates to %q (%v, Big Segments %q, error %v), want %q",
						s.name, m.key, v, d.Reason, d.Reason.GetBigSegmentsStatus(), err, m.want()))
					if len(found[i]) == max {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return slices.Concat(found...)
}

// LaunchDarkly's Go SDK answers the same for every context, and the flag's rules' answer,
// whether it reads the table with its own DynamoDB store or through bigseg with its Redis
// store, with its cache on and off; before a Relay Proxy patch and, once both have seen it
// (polled for), after.
func TestSDKStoresAgree(t *testing.T) {
	before := population(256)
	after := patched(before, 32)
	changed := 0
	for i, m := range after {
		if i >= len(before) || m.want() != before[i].want() {
			changed++
		}
	}
	if changed < 40 {
		t.Fatalf("the patch changes %d answers: too few to show anything", changed)
	}
	e := setUp(t, before)
	sdks := e.sdks(t)

	if d := disagreements(sdks, before, 10); len(d) > 0 {
		t.Fatalf("before the patch:\n%s", lines(d))
	}
	for _, s := range sdks {
		if n, errs := s.store.calls.Load(), s.store.errs.Load(); n < int64(len(before)) || errs > 0 {
			t.Errorf("%s: %d store lookups (%d errors) for %d contexts", s.name, n, errs, len(before))
		}
	}

	c := newDynamoClient(e.moto.url, nil)
	if err := patch(context.Background(), c, e.table, "v1", "v2", time.Now().UnixMilli(), changes(before, after)); err != nil {
		t.Fatal(err)
	}
	// bigseg sees the new lastVersion at its next poll (100 ms) and drops its cache; the SDKs'
	// own caches last 50 ms. Poll until every answer is the new one: the first pass with no
	// disagreement has evaluated every context with every SDK.
	deadline := time.Now().Add(60 * time.Second) // a bound on a patch never seen
	for {
		d := disagreements(sdks, after, 1)
		if len(d) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the patch, still: %s", d[0])
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func lines(s []string) string {
	out := ""
	for i, l := range s {
		out += strconv.Itoa(i+1) + ". " + l + "\n"
	}
	return out
}
