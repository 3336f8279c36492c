package ldbigseg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldcontext"
	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-sdk-common/v3/ldlogtest"
	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
	"github.com/launchdarkly/go-server-sdk/v7/interfaces"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/ldfiledata"
	"go.uber.org/goleak"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// The flag data the SDK reads from a file (ldfiledata): a flag whose rule matches the
// unbounded (Big) segment "beta-testers", generation 3, so its segment ref in the Big Segments
// data is "beta-testers.g3". The segment also has a rule of its own (tier "gold"), which the
// SDK applies only to contexts the Big Segment data does not mention: an excluded context with
// tier gold is still out, which is what makes the exclusion visible.
const (
	flagKey    = "new-checkout"
	segmentRef = "beta-testers.g3"
	inSegment  = "in-segment"    // the rule's variation
	notIn      = "everyone-else" // the fallthrough
	flagData   = `{
  "flags": {
    "new-checkout": {
      "key": "new-checkout", "version": 1, "on": true, "salt": "f",
      "variations": ["everyone-else", "in-segment"],
      "offVariation": 0,
      "fallthrough": {"variation": 0},
      "rules": [{"id": "beta", "variation": 1,
        "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["beta-testers"]}]}]
    }
  },
  "segments": {
    "beta-testers": {
      "key": "beta-testers", "version": 1, "salt": "s",
      "unbounded": true, "generation": 3,
      "rules": [{"id": "gold", "clauses": [{"attribute": "tier", "op": "in", "values": ["gold"]}]}]
    }
  }
}`
)

// sdkClient makes a real LaunchDarkly client (ldclient.MakeCustomClient) with the flag data
// from a file, no events, and the adapter reading bigseg at baseURL with token. Its status
// poll runs every 50 ms. It is closed when the test ends.
func sdkClient(t *testing.T, baseURL, token string, log *ldlogtest.MockLog) *ldclient.LDClient {
	t.Helper()
	return sdkClientOf(t, ldbigseg.BigSegmentStore().BaseURL(baseURL).BearerToken(token), log)
}

// sdkClientOf is sdkClient with the adapter that store configures.
func sdkClientOf(t *testing.T, store *ldbigseg.StoreBuilder, log *ldlogtest.MockLog) *ldclient.LDClient {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flags.json")
	if err := os.WriteFile(path, []byte(flagData), 0o600); err != nil {
		t.Fatal(err)
	}
	config := ldclient.Config{
		DataSource:       ldfiledata.DataSource().FilePaths(path),
		Events:           ldcomponents.NoEvents(),
		DiagnosticOptOut: true,
		Logging:          ldcomponents.Logging().Loggers(log.Loggers),
		BigSegments:      ldcomponents.BigSegments(store).StatusPollInterval(50 * time.Millisecond),
	}
	client, err := ldclient.MakeCustomClient("sdk-key-unused-offline", config, 5*time.Second)
	if err != nil {
		t.Fatalf("MakeCustomClient: %v", err)
	}
	t.Cleanup(func() {
		client.Close()
		if t.Failed() {
			t.Logf("SDK log:\n%s", strings.Join(logLines(log), "\n"))
		}
	})
	return client
}

// evaluation is what the SDK answered for one context.
type evaluation struct {
	Value  string
	Status ldreason.BigSegmentsStatus
}

// evaluate evaluates the flag for a user context with key (and tier, if not "").
func evaluate(t *testing.T, client *ldclient.LDClient, key, tier string) evaluation {
	t.Helper()
	b := ldcontext.NewBuilder(key)
	if tier != "" {
		b.SetString("tier", tier)
	}
	value, detail, err := client.StringVariationDetail(flagKey, b.Build(), "default")
	if err != nil {
		t.Fatalf("evaluating %q: %v", key, err)
	}
	return evaluation{value, detail.Reason.GetBigSegmentsStatus()}
}

// waitAvailable waits until the client's Big Segment store status provider says available
// and not stale, or unavailable, failing after 15 s.
func waitAvailable(t *testing.T, client *ldclient.LDClient, available bool) {
	t.Helper()
	// The SDK reports an unavailable store as not stale.
	want := interfaces.BigSegmentStoreStatus{Available: available, Stale: false}
	provider := client.GetBigSegmentStoreStatusProvider()
	waitFor(t, fmt.Sprintf("the SDK to report the Big Segment store %+v", want), func() bool {
		return provider.GetStatus() == want
	})
}

// noSecretInLogs fails the test if any SDK log line holds one of the secrets.
func noSecretInLogs(t *testing.T, log *ldlogtest.MockLog, secrets ...string) {
	t.Helper()
	for _, line := range logLines(log) {
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("an SDK log line holds a secret: %s", line)
			}
		}
	}
}

// TestSDKEvaluatesThroughBigseg: a real SDK client evaluates a flag whose rule matches a Big
// Segment, through the adapter and a real bigseg (requiring a bearer token) over real Redis;
// in each deployment: unscoped, and through one environment of three.
func TestSDKEvaluatesThroughBigseg(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) { testSDKEvaluatesThroughBigseg(t, d) })
	}
}

func testSDKEvaluatesThroughBigseg(t *testing.T, d deployment) {
	rc, redisURL := sharedRedis(t)
	data, serve := d.serve(t, rc, testPrefix(t, rc))
	ctx := context.Background()
	must(t, data.SetSynchronizedNow(ctx))
	must(t, data.SetMembership(ctx, hashOf("alice"), []string{segmentRef}, nil))
	must(t, data.SetMembership(ctx, hashOf("bob"), nil, []string{segmentRef}))
	must(t, data.SetMembership(ctx, hashOf("erin"), []string{"other-segment.g1"}, []string{"another.g2"}))
	const token, otherToken = "e2e-T0ken_one", "e2e-T0ken_two"
	bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, serve, "BIGSEG_API_TOKENS="+otherToken+","+token)

	log := ldlogtest.NewMockLog()
	client := sdkClientOf(t, d.store(bigseg.URL, token), log)
	waitAvailable(t, client, true)

	tests := []struct {
		context, tier string
		want          evaluation
	}{
		{"alice", "", evaluation{inSegment, ldreason.BigSegmentsHealthy}},    // included
		{"bob", "gold", evaluation{notIn, ldreason.BigSegmentsHealthy}},      // excluded: the segment's rule would match
		{"carol", "", evaluation{notIn, ldreason.BigSegmentsHealthy}},        // unknown to bigseg
		{"dave", "gold", evaluation{inSegment, ldreason.BigSegmentsHealthy}}, // unknown: the segment's own rule applies
		{"erin", "", evaluation{notIn, ldreason.BigSegmentsHealthy}},         // in other segments only
		{"alice", "", evaluation{inSegment, ldreason.BigSegmentsHealthy}},    // again, from the SDK's cache
	}
	for _, tt := range tests {
		if got := evaluate(t, client, tt.context, tt.tier); got != tt.want {
			t.Errorf("%s (tier %q): got %+v, want %+v", tt.context, tt.tier, got, tt.want)
		}
	}

	t.Run("stale data is STALE", func(t *testing.T) {
		must(t, data.SetSynchronizedOn(ctx, time.Now().Add(-time.Hour).UnixMilli()))
		must(t, data.SetMembership(ctx, hashOf("frank"), []string{segmentRef}, nil))
		waitFor(t, "the SDK to see stale data", func() bool {
			return client.GetBigSegmentStoreStatusProvider().GetStatus().Stale
		})
		want := evaluation{inSegment, ldreason.BigSegmentsStale}
		if got := evaluate(t, client, "frank", ""); got != want {
			t.Errorf("frank: got %+v, want %+v", got, want)
		}
	})

	t.Run("a token bigseg does not accept is STORE_ERROR", func(t *testing.T) {
		log := ldlogtest.NewMockLog()
		client := sdkClientOf(t, d.store(bigseg.URL, "not-"+token), log)
		want := evaluation{notIn, ldreason.BigSegmentsStoreError}
		if got := evaluate(t, client, "alice", ""); got != want {
			t.Errorf("alice with a wrong token: got %+v, want %+v", got, want)
		}
		if !log.HasMessageMatch(ldlog.Error, "HTTP 401") {
			t.Errorf("the SDK logged no HTTP 401: %v", logLines(log))
		}
		noSecretInLogs(t, log, token, otherToken, "not-"+token)
	})

	if !log.HasMessageMatch(ldlog.Info, "Big Segment store: bigseg at "+bigseg.URL) {
		t.Errorf("the store did not log through the SDK's loggers: %v", logLines(log))
	}
	noSecretInLogs(t, log, token, otherToken)
}

// TestSDKEvaluatesThroughBigsegOnDynamoDB: a real SDK client evaluates the flag through the
// adapter and a real bigseg (requiring a bearer token, its cache at its defaults) reading a
// DynamoDB table (moto_server) in LaunchDarkly's layout with no prefix, written as the Relay
// Proxy writes it; then the table's synchronization time an hour old makes it STALE.
func TestSDKEvaluatesThroughBigsegOnDynamoDB(t *testing.T) {
	m := sharedMoto(t)
	c := m.Client(t)
	table := testTable(t, c)
	data := ldDynamoLayout{c, table, ""}
	ctx := context.Background()
	must(t, data.SetSynchronizedNow(ctx))
	must(t, data.SetMembership(ctx, hashOf("alice"), []string{segmentRef}, nil))
	must(t, data.SetMembership(ctx, hashOf("bob"), nil, []string{segmentRef}))
	must(t, data.SetMembership(ctx, hashOf("erin"), []string{"other-segment.g1"}, []string{"another.g2"}))
	const token = "e2e-T0ken_dynamo"
	bigseg := mustStartBigseg(t, append(m.BigsegSettings(t, table), "BIGSEG_API_TOKENS="+token)...)

	log := ldlogtest.NewMockLog()
	client := sdkClient(t, bigseg.URL, token, log)
	waitAvailable(t, client, true)

	tests := []struct {
		context, tier string
		want          evaluation
	}{
		{"alice", "", evaluation{inSegment, ldreason.BigSegmentsHealthy}},    // included
		{"bob", "gold", evaluation{notIn, ldreason.BigSegmentsHealthy}},      // excluded: the segment's rule would match
		{"carol", "", evaluation{notIn, ldreason.BigSegmentsHealthy}},        // no item
		{"dave", "gold", evaluation{inSegment, ldreason.BigSegmentsHealthy}}, // no item: the segment's own rule applies
		{"erin", "", evaluation{notIn, ldreason.BigSegmentsHealthy}},         // in other segments only
	}
	for _, tt := range tests {
		if got := evaluate(t, client, tt.context, tt.tier); got != tt.want {
			t.Errorf("%s (tier %q): got %+v, want %+v", tt.context, tt.tier, got, tt.want)
		}
	}

	t.Run("stale data is STALE", func(t *testing.T) {
		must(t, data.SetSynchronizedOn(ctx, time.Now().Add(-time.Hour).UnixMilli()))
		must(t, data.SetMembership(ctx, hashOf("frank"), []string{segmentRef}, nil))
		waitFor(t, "the SDK to see stale data", func() bool {
			return client.GetBigSegmentStoreStatusProvider().GetStatus().Stale
		})
		want := evaluation{inSegment, ldreason.BigSegmentsStale}
		if got := evaluate(t, client, "frank", ""); got != want {
			t.Errorf("frank: got %+v, want %+v", got, want)
		}
	})
	noSecretInLogs(t, log, token)
}

// TestSDKStatusFollowsBigseg: the SDK's Big Segment store status goes unavailable, and
// evaluations get STORE_ERROR, in each way bigseg can fail; and both come back when it
// recovers, without restarting the SDK. Each phase evaluates contexts the SDK has not cached.
// In each deployment: unscoped, and through one environment of three (where only that
// environment's data is made unreadable).
func TestSDKStatusFollowsBigseg(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) { testSDKStatusFollowsBigseg(t, d) })
	}
}

func testSDKStatusFollowsBigseg(t *testing.T, d deployment) {
	ctx := context.Background()
	storeError := evaluation{notIn, ldreason.BigSegmentsStoreError}
	healthy := evaluation{inSegment, ldreason.BigSegmentsHealthy}

	t.Run("bigseg answers STORE_ERROR: its store's data is unreadable", func(t *testing.T) {
		rc, redisURL := sharedRedis(t)
		data, serve := d.serve(t, rc, testPrefix(t, rc))
		must(t, data.SetSynchronizedNow(ctx))
		for _, key := range []string{"alice-1", "alice-2", "alice-3"} {
			must(t, data.SetMembership(ctx, hashOf(key), []string{segmentRef}, nil))
		}
		bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, serve)
		client := sdkClientOf(t, d.store(bigseg.URL, ""), ldlogtest.NewMockLog())
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-1", ""); got != healthy {
			t.Fatalf("before: got %+v, want %+v", got, healthy)
		}

		// A synchronization time that is not a number: bigseg's poller marks its store
		// unavailable, and its lookups answer 200 with status STORE_ERROR.
		must(t, rc.Set(ctx, data.prefix+":big_segments_synchronized_on", "not-a-number", 0).Err())
		waitAvailable(t, client, false)
		if got := evaluate(t, client, "alice-2", ""); got != storeError {
			t.Errorf("while unreadable: got %+v, want %+v", got, storeError)
		}

		must(t, data.SetSynchronizedNow(ctx))
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-3", ""); got != healthy {
			t.Errorf("after: got %+v, want %+v", got, healthy)
		}
	})

	t.Run("bigseg answers 503: Redis stopped and restarted", func(t *testing.T) {
		redis := startRedis(t)
		data, serve := d.serve(t, redis.Client(t), "launchdarkly")
		write := func(keys ...string) {
			must(t, data.SetSynchronizedNow(ctx))
			for _, key := range keys {
				must(t, data.SetMembership(ctx, hashOf(key), []string{segmentRef}, nil))
			}
		}
		write("alice-1", "alice-2")
		bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redis.URL()+"?dial_timeout=200ms", serve)
		client := sdkClientOf(t, d.store(bigseg.URL, ""), ldlogtest.NewMockLog())
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-1", ""); got != healthy {
			t.Fatalf("before: got %+v, want %+v", got, healthy)
		}

		redis.Stop()
		waitAvailable(t, client, false)
		if got := evaluate(t, client, "alice-2", ""); got != storeError {
			t.Errorf("while Redis is down: got %+v, want %+v", got, storeError)
		}

		redis.Start(t) // empty: it saves nothing; the synchronizer writes again
		write("alice-3")
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-3", ""); got != healthy {
			t.Errorf("after: got %+v, want %+v", got, healthy)
		}
	})

	t.Run("bigseg down and restarted", func(t *testing.T) {
		rc, redisURL := sharedRedis(t)
		data, serve := d.serve(t, rc, testPrefix(t, rc))
		must(t, data.SetSynchronizedNow(ctx))
		for _, key := range []string{"alice-1", "alice-2", "alice-3"} {
			must(t, data.SetMembership(ctx, hashOf(key), []string{segmentRef}, nil))
		}
		bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, serve)
		client := sdkClientOf(t, d.store(bigseg.URL, ""), ldlogtest.NewMockLog())
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-1", ""); got != healthy {
			t.Fatalf("before: got %+v, want %+v", got, healthy)
		}

		bigseg.Kill()
		waitAvailable(t, client, false)
		if got := evaluate(t, client, "alice-2", ""); got != storeError {
			t.Errorf("while bigseg is down: got %+v, want %+v", got, storeError)
		}

		bigseg.Restart(t)
		waitAvailable(t, client, true)
		if got := evaluate(t, client, "alice-3", ""); got != healthy {
			t.Errorf("after: got %+v, want %+v", got, healthy)
		}
	})
}

// TestNoGoroutineLeftAfterClose: concurrent lookups through the adapter against a real bigseg
// open several keep-alive connections; after Close, no goroutine of the store's is left (its
// transport's connection goroutines included). The same for an SDK client and its store.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	rc, redisURL := sharedRedis(t)
	data := ldLayout{rc, testPrefix(t, rc)}
	must(t, data.SetSynchronizedNow(context.Background()))
	bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, "BIGSEG_PREFIX="+data.prefix)
	before := goleak.IgnoreCurrent()

	t.Run("store", func(t *testing.T) {
		store, err := ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Build(clientContext(nil))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					if _, err := store.GetMembership(hashOf(strings.Repeat("k", i+j+1))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if _, err := store.GetMetadata(); err != nil {
			t.Fatal(err)
		}
		store.Close()
		goleak.VerifyNone(t, before)
	})

	t.Run("SDK client", func(t *testing.T) {
		log := ldlogtest.NewMockLog()
		path := filepath.Join(t.TempDir(), "flags.json")
		must(t, os.WriteFile(path, []byte(flagData), 0o600))
		client, err := ldclient.MakeCustomClient("sdk-key-unused-offline", ldclient.Config{
			DataSource:       ldfiledata.DataSource().FilePaths(path),
			Events:           ldcomponents.NoEvents(),
			DiagnosticOptOut: true,
			Logging:          ldcomponents.Logging().Loggers(log.Loggers),
			BigSegments:      ldcomponents.BigSegments(ldbigseg.BigSegmentStore().BaseURL(bigseg.URL)),
		}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			evaluate(t, client, strings.Repeat("c", i+1), "")
		}
		client.Close()
		goleak.VerifyNone(t, before)
	})
}

// logLines is everything the SDK (and the store) logged, one line per message.
func logLines(log *ldlogtest.MockLog) []string {
	var out []string
	for _, item := range log.GetAllOutput() {
		out = append(out, item.Level.Name()+": "+item.Message)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
