package ldbigseg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-sdk-common/v3/ldlogtest"
	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	ldclient "github.com/launchdarkly/go-server-sdk/v7"
	"github.com/launchdarkly/go-server-sdk/v7/interfaces"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"
	goredis "github.com/redis/go-redis/v9"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// environmentNames are the environments of one bigseg in these tests, as one Relay Proxy
// serves them.
var environmentNames = []string{"production", "staging", "qa"}

// environmentLayouts gives each environment a key prefix of the test's own on the shared
// Redis, and returns the layouts with the BIGSEG_ENVIRONMENTS setting that serves them.
func environmentLayouts(t *testing.T, rc *goredis.Client) (map[string]ldLayout, string) {
	t.Helper()
	layouts := map[string]ldLayout{}
	var pairs []string
	for _, name := range environmentNames {
		layouts[name] = ldLayout{rc, testPrefix(t, rc)}
		pairs = append(pairs, name+"="+layouts[name].prefix)
	}
	return layouts, "BIGSEG_ENVIRONMENTS=" + strings.Join(pairs, ",")
}

// waitStatus waits until the client's Big Segment store status provider says want, failing
// after 10 s.
func waitStatus(t *testing.T, client *ldclient.LDClient, want interfaces.BigSegmentStoreStatus) {
	t.Helper()
	provider := client.GetBigSegmentStoreStatusProvider()
	waitFor(t, fmt.Sprintf("the SDK to report the Big Segment store %+v", want), func() bool {
		return provider.GetStatus() == want
	})
}

// TestSDKEvaluatesThroughEachEnvironment: one bigseg serves three environments
// (BIGSEG_ENVIRONMENTS) from the shared Redis, and three real SDK clients in one process, one
// per environment (Environment), evaluate a flag with a Big Segment rule for the same
// contexts: each gets its own environment's memberships and status (qa's data is stale), never
// another's. Then an environment bigseg does not serve, and a store without Environment.
func TestSDKEvaluatesThroughEachEnvironment(t *testing.T) {
	rc, redisURL := sharedRedis(t)
	layouts, environments := environmentLayouts(t, rc)
	ctx := context.Background()
	for env, data := range map[string]struct {
		syncedAgo          time.Duration
		included, excluded []string
	}{
		"production": {0, []string{"alice"}, []string{"bob"}},
		"staging":    {0, []string{"bob", "carol"}, []string{"alice"}},
		"qa":         {time.Hour, []string{"dave"}, []string{"carol"}}, // stale
	} {
		l := layouts[env]
		must(t, l.SetSynchronizedOn(ctx, time.Now().Add(-data.syncedAgo).UnixMilli()))
		for _, key := range data.included {
			must(t, l.SetMembership(ctx, hashOf(key), []string{segmentRef}, nil))
		}
		for _, key := range data.excluded {
			must(t, l.SetMembership(ctx, hashOf(key), nil, []string{segmentRef}))
		}
	}
	const token = "e2e-envs-T0ken"
	bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, environments, "BIGSEG_API_TOKENS="+token)

	// The same contexts in each environment. Tier gold makes the segment's own rule match a
	// context the Big Segment data does not name, so that "excluded" and "unknown" differ.
	contexts := []struct{ key, tier string }{{"alice", ""}, {"bob", "gold"}, {"carol", "gold"}, {"dave", ""}}
	healthy := interfaces.BigSegmentStoreStatus{Available: true, Stale: false}
	tests := []struct {
		env    string
		status interfaces.BigSegmentStoreStatus
		want   []string // the flag's value for each context
		reason ldreason.BigSegmentsStatus
	}{
		// alice included, bob excluded, carol and dave unknown
		{"production", healthy, []string{inSegment, notIn, inSegment, notIn}, ldreason.BigSegmentsHealthy},
		// alice excluded, bob and carol included, dave unknown
		{"staging", healthy, []string{notIn, inSegment, inSegment, notIn}, ldreason.BigSegmentsHealthy},
		// alice and bob unknown, carol excluded, dave included; synchronized an hour ago
		{"qa", interfaces.BigSegmentStoreStatus{Available: true, Stale: true}, []string{notIn, inSegment, notIn, inSegment}, ldreason.BigSegmentsStale},
	}
	clients := map[string]*ldclient.LDClient{}
	logs := map[string]*ldlogtest.MockLog{}
	for _, tt := range tests { // all three open at once, in one process
		logs[tt.env] = ldlogtest.NewMockLog()
		clients[tt.env] = sdkClientOf(t, ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Environment(tt.env).BearerToken(token), logs[tt.env])
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			client := clients[tt.env]
			waitStatus(t, client, tt.status)
			for i, c := range contexts {
				want := evaluation{tt.want[i], tt.reason}
				if got := evaluate(t, client, c.key, c.tier); got != want {
					t.Errorf("%s (tier %q) in %s: got %+v, want %+v", c.key, c.tier, tt.env, got, want)
				}
			}
			if !logs[tt.env].HasMessageMatch(ldlog.Info, "Big Segment store: bigseg at "+bigseg.URL+", environment "+tt.env+"$") {
				t.Errorf("no Info line naming the environment: %v", logLines(logs[tt.env]))
			}
			noSecretInLogs(t, logs[tt.env], token)
		})
	}

	t.Run("an environment bigseg does not serve is STORE_ERROR, saying so", func(t *testing.T) {
		log := ldlogtest.NewMockLog()
		client := sdkClientOf(t, ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Environment("preview").BearerToken(token), log)
		waitStatus(t, client, interfaces.BigSegmentStoreStatus{Available: false})
		want := evaluation{notIn, ldreason.BigSegmentsStoreError}
		if got := evaluate(t, client, "alice", ""); got != want {
			t.Errorf("alice in preview: got %+v, want %+v", got, want)
		}
		for _, line := range []string{
			`Big Segment store returned error: bigseg membership: HTTP 404 \(bigseg does not serve environment "preview", or the base URL is not bigseg's\): no environment preview: the environments served are production, staging, qa`,
			`Big Segment store status query returned error: bigseg status: HTTP 404 \(bigseg does not serve environment "preview"`,
		} {
			if !log.HasMessageMatch(ldlog.Error, line) {
				t.Errorf("the SDK did not log %q: %v", line, logLines(log))
			}
		}
	})

	t.Run("without Environment, a bigseg of several environments is STORE_ERROR, saying so", func(t *testing.T) {
		log := ldlogtest.NewMockLog()
		client := sdkClient(t, bigseg.URL, token, log)
		waitStatus(t, client, interfaces.BigSegmentStoreStatus{Available: false})
		want := evaluation{notIn, ldreason.BigSegmentsStoreError}
		if got := evaluate(t, client, "alice", ""); got != want {
			t.Errorf("alice unscoped: got %+v, want %+v", got, want)
		}
		for _, line := range []string{
			`bigseg membership: HTTP 404 \(no such route: is the base URL bigseg's\? One serving several environments needs Environment set\): several environments are served \(production, staging, qa\)`,
			`bigseg status: bigseg serves several environments \(production, qa, staging\): set the store's Environment to one of them`,
		} {
			if !log.HasMessageMatch(ldlog.Error, line) {
				t.Errorf("the SDK did not log %q: %v", line, logLines(log))
			}
		}
	})
}

// TestScopedTokenThroughEnvironments: a token of BIGSEG_API_TOKENS_FILE scoped to staging
// ("tok-staging staging") reads staging, and is refused (403) on production, both by the store
// (an HTTPError) and in a real SDK client (STORE_ERROR, the 403 logged); bigseg's /status is
// open, so the SDK still reports that store available. A token of every environment reads
// production; an environment not served is a 404.
func TestScopedTokenThroughEnvironments(t *testing.T) {
	rc, redisURL := sharedRedis(t)
	layouts, environments := environmentLayouts(t, rc)
	ctx := context.Background()
	for _, env := range environmentNames {
		must(t, layouts[env].SetSynchronizedNow(ctx))
		must(t, layouts[env].SetMembership(ctx, hashOf("alice"), []string{segmentRef}, nil))
	}
	const allToken, stagingToken = "tok-all", "tok-staging"
	tokens := filepath.Join(t.TempDir(), "tokens")
	must(t, os.WriteFile(tokens, []byte("# token  environments\n"+allToken+"\n"+stagingToken+" staging\n"), 0o600))
	bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, environments, "BIGSEG_API_TOKENS_FILE="+tokens)

	t.Run("store", func(t *testing.T) {
		alice := ldbigsegMembership([]string{segmentRef})
		tests := []struct {
			env, token         string
			membership, status wantErr
		}{
			{env: "staging", token: stagingToken},
			{env: "production", token: allToken},
			{env: "production", token: stagingToken, membership: wantErr{httpStatus: 403,
				contains: `HTTP 403 (the bearer token does not open environment "production"): this token does not open environment production`}},
			{env: "qa", token: stagingToken, membership: wantErr{httpStatus: 403, contains: "this token does not open environment qa"}},
			{env: "preview", token: allToken,
				membership: wantErr{httpStatus: 404, contains: `HTTP 404 (bigseg does not serve environment "preview", or the base URL is not bigseg's): no environment preview`},
				status:     wantErr{httpStatus: 404, contains: "the environments served are production, staging, qa"}},
			// The token check comes first: a token of staging learns nothing of other names.
			{env: "preview", token: stagingToken,
				membership: wantErr{httpStatus: 403, contains: "this token does not open environment preview"},
				status:     wantErr{httpStatus: 404, contains: "no environment preview"}},
			{env: "", token: stagingToken,
				membership: wantErr{httpStatus: 403, contains: "this token does not open every environment"},
				status:     wantErr{contains: "bigseg serves several environments (production, qa, staging)"}},
		}
		for _, tt := range tests {
			name := tt.env
			if name == "" {
				name = "(none)"
			}
			t.Run(name+" "+tt.token, func(t *testing.T) {
				store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Environment(tt.env).BearerToken(tt.token))
				m, err := store.GetMembership(hashOf("alice"))
				checkMembership(t, m, err, tt.membership, alice)
				_, err = store.GetMetadata()
				checkErr(t, err, tt.status)
			})
		}
	})

	t.Run("SDK", func(t *testing.T) {
		healthy := interfaces.BigSegmentStoreStatus{Available: true, Stale: false}
		for _, tt := range []struct {
			env, token string
			want       evaluation
		}{
			{"staging", stagingToken, evaluation{inSegment, ldreason.BigSegmentsHealthy}},
			{"production", allToken, evaluation{inSegment, ldreason.BigSegmentsHealthy}},
			{"production", stagingToken, evaluation{notIn, ldreason.BigSegmentsStoreError}},
		} {
			t.Run(tt.env+" "+tt.token, func(t *testing.T) {
				log := ldlogtest.NewMockLog()
				client := sdkClientOf(t, ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Environment(tt.env).BearerToken(tt.token), log)
				waitStatus(t, client, healthy) // /status is open: no token is asked for it
				if got := evaluate(t, client, "alice", ""); got != tt.want {
					t.Errorf("alice: got %+v, want %+v", got, tt.want)
				}
				refused := log.HasMessageMatch(ldlog.Error, `HTTP 403 \(the bearer token does not open environment "production"\)`)
				if want := tt.want.Status == ldreason.BigSegmentsStoreError; refused != want {
					t.Errorf("the SDK logged the 403: %v, want %v; log: %v", refused, want, logLines(log))
				}
				noSecretInLogs(t, log, allToken, stagingToken)
			})
		}
	})
}

// ldbigsegMembership is the membership LaunchDarkly's own stores return for refs included.
func ldbigsegMembership(included []string) subsystems.BigSegmentMembership {
	return ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, nil)
}

// checkMembership checks a GetMembership result: the error w describes, or want.
func checkMembership(t *testing.T, got subsystems.BigSegmentMembership, err error, w wantErr, want subsystems.BigSegmentMembership) {
	t.Helper()
	checkErr(t, err, w)
	if w.any() {
		if got != nil {
			t.Errorf("membership %v with the error, want nil", got)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("membership (-want +got):\n%s", diff)
	}
}

// deployment is one way a bigseg serves a test's data, and the SDK's store reads it; the
// end-to-end tests of sdk_test.go run in each. Unscoped: BIGSEG_PREFIX, and the unscoped
// routes. Scoped: the data is the environment staging of three (BIGSEG_ENVIRONMENTS), read with
// the store's Environment, while production and qa hold the opposite (see mirrored).
type deployment struct {
	name        string
	environment string // the store's Environment; "" for unscoped
}

var deployments = []deployment{{"unscoped", ""}, {"environment staging of three", "staging"}}

// serve returns the writer of the test's data, under prefix on c's Redis, and the bigseg
// setting that serves it.
func (d deployment) serve(t *testing.T, c *goredis.Client, prefix string) (mirrored, string) {
	t.Helper()
	data := mirrored{ldLayout: ldLayout{c, prefix}}
	if d.environment == "" {
		return data, "BIGSEG_PREFIX=" + prefix
	}
	pairs := []string{d.environment + "=" + prefix}
	for _, other := range []string{"production", "qa"} {
		l := ldLayout{c, testPrefix(t, c)}
		data.others = append(data.others, l)
		pairs = append(pairs, other+"="+l.prefix)
	}
	return data, "BIGSEG_ENVIRONMENTS=" + strings.Join(pairs, ",")
}

// store is the adapter reading bigseg at baseURL with token, as the deployment has it read.
func (d deployment) store(baseURL, token string) *ldbigseg.StoreBuilder {
	return ldbigseg.BigSegmentStore().BaseURL(baseURL).Environment(d.environment).BearerToken(token)
}

// mirrored writes a test's data under its prefix and, under the others' (the other
// environments), the opposite: each context's included refs excluded and its excluded refs
// included, and fresh data stale and stale data fresh. A store reading another environment
// than its own, or a bigseg answering with another's, evaluates differently.
type mirrored struct {
	ldLayout
	others []ldLayout
}

// SetSynchronizedOn writes the synchronization time; the others get an hour before it if it is
// fresh (within the SDK's 2 min), else now.
func (m mirrored) SetSynchronizedOn(ctx context.Context, ms int64) error {
	if err := m.ldLayout.SetSynchronizedOn(ctx, ms); err != nil {
		return err
	}
	opposite := time.Now().UnixMilli()
	if time.Since(time.UnixMilli(ms)) < 2*time.Minute {
		opposite = ms - time.Hour.Milliseconds()
	}
	for _, o := range m.others {
		if err := o.SetSynchronizedOn(ctx, opposite); err != nil {
			return err
		}
	}
	return nil
}

// SetSynchronizedNow marks the data as synchronized now (the others' an hour ago).
func (m mirrored) SetSynchronizedNow(ctx context.Context) error {
	return m.SetSynchronizedOn(ctx, time.Now().UnixMilli())
}

// SetMembership adds refs to a context hash's sets, and the opposite to the others'.
func (m mirrored) SetMembership(ctx context.Context, hash string, included, excluded []string) error {
	if err := m.ldLayout.SetMembership(ctx, hash, included, excluded); err != nil {
		return err
	}
	for _, o := range m.others {
		if err := o.SetMembership(ctx, hash, excluded, included); err != nil {
			return err
		}
	}
	return nil
}
