package ldbigseg_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/testhelpers/storetest"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// TestBigSegmentStoreSuite runs LaunchDarkly's own Big Segment store test suite
// (go-server-sdk v7 testhelpers/storetest) against the adapter, talking to a real bigseg that
// reads the shared Redis, with bigseg's cache off.
func TestBigSegmentStoreSuite(t *testing.T) {
	rc, redisURL := sharedRedis(t)
	base := testPrefix(t, rc)
	redisPrefix := func(prefix string) string {
		if prefix == "" {
			return base
		}
		return base + "_" + prefix
	}
	runStoreSuite(t,
		func(prefix string) []string {
			return []string{"BIGSEG_REDIS_URL=" + redisURL, "BIGSEG_PREFIX=" + redisPrefix(prefix)}
		},
		func(prefix string) layoutWriter { return ldLayout{rc, redisPrefix(prefix)} },
	)
}

// TestBigSegmentStoreSuiteOnDynamoDB runs the same suite against a real bigseg reading a
// DynamoDB table (moto_server) in LaunchDarkly's DynamoDB layout, written as the Relay Proxy
// writes it. The suite names only the default prefix, which on DynamoDB is none: bigseg is
// started without BIGSEG_PREFIX, and the items are "big_segments_user" and
// "big_segments_metadata" of a table of the test's own.
func TestBigSegmentStoreSuiteOnDynamoDB(t *testing.T) {
	m := sharedMoto(t)
	c := m.Client(t)
	table := testTable(t, c)
	runStoreSuite(t,
		func(prefix string) []string {
			settings := m.BigsegSettings(t, table)
			if prefix != "" {
				settings = append(settings, "BIGSEG_PREFIX="+prefix)
			}
			return settings
		},
		func(prefix string) layoutWriter { return ldDynamoLayout{c, table, prefix} },
	)
}

// layoutWriter writes Big Segments data as a synchronizer does: ldLayout (Redis) and
// ldDynamoLayout (DynamoDB).
type layoutWriter interface {
	Clear(ctx context.Context) error
	SetSynchronizedOn(ctx context.Context, ms int64) error
	SetMembership(ctx context.Context, hash string, included, excluded []string) error
}

// runStoreSuite runs the suite against a bigseg per prefix the suite names (a prefix is a
// server setting; the suite names only the default, ""), started lazily with the settings of
// that prefix and bigseg's cache off, and stopped when the test ends; the suite writes through
// the layout of that prefix. bigseg's /status is its last poll of the store (every 50 ms
// here), so the functions that change metadata return once bigseg reports the change: polled,
// not slept.
func runStoreSuite(t *testing.T, settings func(prefix string) []string, layout func(prefix string) layoutWriter) {
	bin := serverBinary(t)
	var mu sync.Mutex
	servers := map[string]*bigsegProcess{}
	t.Cleanup(func() {
		for _, p := range servers {
			p.Stop()
			if t.Failed() {
				t.Logf("bigseg %s log:\n%s", p.Addr, p.Log())
			}
		}
	})
	// running returns the bigseg of a prefix if it has been started.
	running := func(prefix string) *bigsegProcess {
		mu.Lock()
		defer mu.Unlock()
		return servers[prefix]
	}
	// serve returns the bigseg of a prefix, starting it the first time.
	serve := func(prefix string) (*bigsegProcess, error) {
		mu.Lock()
		defer mu.Unlock()
		if p := servers[prefix]; p != nil {
			return p, nil
		}
		p, err := startBigseg(bin, append(settings(prefix), "BIGSEG_CACHE_SIZE=0")...)
		if err != nil {
			return nil, err
		}
		servers[prefix] = p
		return p, nil
	}
	// reported waits until the prefix's bigseg, if running, reports this synchronization time.
	reported := func(prefix string, ms int64) error {
		p := running(prefix)
		if p == nil {
			return nil // it will read the data when it starts
		}
		return p.WaitStatus(fmt.Sprintf("lastSynchronizedOn %d", ms), func(st statusBody) bool {
			return st.Available && st.LastSynchronizedOn == ms
		})
	}
	ctx := context.Background()

	storetest.NewBigSegmentStoreTestSuite(
		func(prefix string) subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
			p, err := serve(prefix)
			if err != nil {
				return failingConfigurer{err}
			}
			return ldbigseg.BigSegmentStore().BaseURL(p.URL)
		},
		func(prefix string) error {
			if err := layout(prefix).Clear(ctx); err != nil {
				return err
			}
			return reported(prefix, 0)
		},
		func(prefix string, md subsystems.BigSegmentStoreMetadata) error {
			if err := layout(prefix).SetSynchronizedOn(ctx, int64(md.LastUpToDate)); err != nil {
				return err
			}
			return reported(prefix, int64(md.LastUpToDate))
		},
		func(prefix, hash string, included, excluded []string) error {
			return layout(prefix).SetMembership(ctx, hash, included, excluded) // bigseg's cache is off
		},
	).Run(t)

	if running("") == nil {
		t.Error("the suite never built a store: it tested nothing")
	}
}

// failingConfigurer reports, from Build, that the suite's bigseg could not start: the suite
// runs in subtests, where only the subtest may fail.
type failingConfigurer struct{ err error }

func (f failingConfigurer) Build(subsystems.ClientContext) (subsystems.BigSegmentStore, error) {
	return nil, f.err
}

// TestBigSegmentStoreSuiteThroughAnEnvironment runs the same suite through one environment of
// a bigseg serving three (BIGSEG_ENVIRONMENTS, a prefix each on the shared Redis, cache off),
// with the store's Environment and a bearer token. The suite's data is staging's; production
// and qa hold other data for the suite's context hash and another synchronization time, which
// a store reading another environment, or bigseg answering with one, would return.
func TestBigSegmentStoreSuiteThroughAnEnvironment(t *testing.T) {
	rc, redisURL := sharedRedis(t)
	const env, token = "staging", "suite-T0ken"
	layouts := map[string]ldLayout{}
	var pairs []string
	for _, name := range []string{"production", env, "qa"} {
		layouts[name] = ldLayout{rc, testPrefix(t, rc)}
		pairs = append(pairs, name+"="+layouts[name].prefix)
	}
	ctx := context.Background()
	for _, other := range []string{"production", "qa"} {
		must(t, layouts[other].SetSynchronizedOn(ctx, 999))
		must(t, layouts[other].SetMembership(ctx, "userhash", []string{"other-environment.g1"}, []string{"key1", "key2"}))
	}
	bigseg := mustStartBigseg(t, "BIGSEG_REDIS_URL="+redisURL, "BIGSEG_ENVIRONMENTS="+strings.Join(pairs, ","),
		"BIGSEG_CACHE_SIZE=0", "BIGSEG_API_TOKENS="+token)
	reported := func(ms int64) error {
		return bigseg.WaitEnvironmentStatus(env, fmt.Sprintf("lastSynchronizedOn %d", ms), func(st statusBody) bool {
			return st.Available && st.LastSynchronizedOn == ms
		})
	}
	// staging: the suite names only the default prefix, "".
	staging := func(prefix string) (ldLayout, error) {
		if prefix != "" {
			return ldLayout{}, fmt.Errorf("the suite named prefix %q; this test serves it only the environment %s", prefix, env)
		}
		return layouts[env], nil
	}

	var built atomic.Int64
	storetest.NewBigSegmentStoreTestSuite(
		func(prefix string) subsystems.ComponentConfigurer[subsystems.BigSegmentStore] {
			if _, err := staging(prefix); err != nil {
				return failingConfigurer{err}
			}
			built.Add(1)
			return ldbigseg.BigSegmentStore().BaseURL(bigseg.URL).Environment(env).BearerToken(token)
		},
		func(prefix string) error {
			l, err := staging(prefix)
			if err != nil {
				return err
			}
			if err := l.Clear(ctx); err != nil {
				return err
			}
			return reported(0)
		},
		func(prefix string, md subsystems.BigSegmentStoreMetadata) error {
			l, err := staging(prefix)
			if err != nil {
				return err
			}
			if err := l.SetSynchronizedOn(ctx, int64(md.LastUpToDate)); err != nil {
				return err
			}
			return reported(int64(md.LastUpToDate))
		},
		func(prefix, hash string, included, excluded []string) error {
			l, err := staging(prefix)
			if err != nil {
				return err
			}
			return l.SetMembership(ctx, hash, included, excluded) // bigseg's cache is off
		},
	).Run(t)

	if built.Load() == 0 {
		t.Error("the suite never built a store: it tested nothing")
	}
}
