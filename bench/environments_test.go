package main

import (
	"slices"
	"strings"
	"testing"
)

func TestEnvironmentsEnv(t *testing.T) {
	if got, want := environmentsSetting(3), "env0=launchdarkly,env1=launchdarkly-env1,env2=launchdarkly-env2"; got != want {
		t.Errorf("environmentsSetting(3) = %q, want %q", got, want)
	}
	// env0's share of the cache is the one-environment server's whole cache.
	for config, want := range map[string]string{"hot": "BIGSEG_CACHE_SIZE=300000", "defaults": "BIGSEG_CACHE_SIZE=300000", "off": "BIGSEG_CACHE_SIZE=0"} {
		if env := environmentsEnv(3, config); !slices.Contains(env, want) || !strings.HasPrefix(env[0], "BIGSEG_ENVIRONMENTS=env0=") {
			t.Errorf("environmentsEnv(3, %s) = %q, want %s", config, env, want)
		}
	}
	if got := syncedOnKeys(2); !slices.Equal(got, []string{syncedOnKey, "launchdarkly-env1:big_segments_synchronized_on"}) {
		t.Errorf("syncedOnKeys(2) = %q", got)
	}
}
