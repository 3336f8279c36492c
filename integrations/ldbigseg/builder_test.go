package ldbigseg_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-sdk-common/v3/ldlogtest"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// TestBuildRejectsBadOptions checks that Build refuses what cannot work, saying why, without
// quoting the token or a password in the URL.
func TestBuildRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		builder *ldbigseg.StoreBuilder
		want    string
	}{
		{"not a URL", ldbigseg.BigSegmentStore().BaseURL("http://user:pa55word@[::1"), "not a valid URL"},
		{"no scheme", ldbigseg.BigSegmentStore().BaseURL("bigseg:8080"), `scheme must be http or https, not "bigseg"`},
		{"other scheme", ldbigseg.BigSegmentStore().BaseURL("redis://bigseg:6379"), `not "redis"`},
		{"no host", ldbigseg.BigSegmentStore().BaseURL("http:///memberships"), "no host"},
		{"query", ldbigseg.BigSegmentStore().BaseURL("http://bigseg:8080/?contextHash=x"), "query"},
		{"space in the token", ldbigseg.BigSegmentStore().BearerToken("pa55 word"), "character 5"},
		{"newline in the token", ldbigseg.BigSegmentStore().BearerToken("pa55\nword"), "character 5"},
		{"non-ASCII token", ldbigseg.BigSegmentStore().BearerToken("pa55wörd"), "character 6"},
		{"upper-case environment", ldbigseg.BigSegmentStore().Environment("Production"), `"Production" is not an environment name`},
		{"environment with a slash", ldbigseg.BigSegmentStore().Environment("prod/../status"), `"prod/../status" is not an environment name`},
		{"environment with a space", ldbigseg.BigSegmentStore().Environment("prod staging"), "not an environment name"},
		{"environment with a dot", ldbigseg.BigSegmentStore().Environment("."), "not an environment name"},
		{"environment with an escape", ldbigseg.BigSegmentStore().Environment("prod%2F"), "not an environment name"},
		{"environment starting with -", ldbigseg.BigSegmentStore().Environment("-prod"), "not an environment name"},
		{"non-ASCII environment", ldbigseg.BigSegmentStore().Environment("prüf"), "not an environment name"},
		{"environment of 64 characters", ldbigseg.BigSegmentStore().Environment(strings.Repeat("e", 64)), "at most 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := tt.builder.Build(clientContext(nil))
			if err == nil {
				store.Close()
				t.Fatal("Build succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			for _, secret := range []string{"pa55"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes a secret", err)
				}
			}
		})
	}
}

// TestBuildLogs checks what the store tells the SDK's loggers: where it reads from (never the
// token or a password), and a warning when the token would cross a network in clear text.
func TestBuildLogs(t *testing.T) {
	tests := []struct {
		baseURL  string
		token    string
		wantWarn bool
	}{
		{"http://bigseg.internal:8080", testToken, true},
		{"https://bigseg.internal", testToken, false},
		{"http://127.0.0.1:8080", testToken, false},
		{"http://localhost:8080", testToken, false},
		{"http://[::1]:8080", testToken, false},
		{"http://bigseg.internal:8080", "", false},
		{"http://user:pa55word@bigseg.internal:8080", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.baseURL+" "+tt.token, func(t *testing.T) {
			log := ldlogtest.NewMockLog()
			store, err := ldbigseg.BigSegmentStore().BaseURL(tt.baseURL).BearerToken(tt.token).Build(clientContext(log))
			if err != nil {
				t.Fatal(err)
			}
			store.Close()
			if got := log.HasMessageMatch(ldlog.Warn, "over plain HTTP"); got != tt.wantWarn {
				t.Errorf("plain HTTP warning logged: %v, want %v; log: %v", got, tt.wantWarn, log.GetAllOutput())
			}
			if !log.HasMessageMatch(ldlog.Info, "bigseg at http") {
				t.Errorf("no Info line naming the base URL; log: %v", log.GetAllOutput())
			}
			for _, line := range log.GetAllOutput() {
				if strings.Contains(line.Message, testToken) || strings.Contains(line.Message, "pa55word") {
					t.Errorf("log line holds a secret: %s", line.Message)
				}
			}
		})
	}
}

// TestBuildAcceptsEnvironmentNames checks the names bigseg's BIGSEG_ENVIRONMENTS accepts, and
// that the Info line names the environment.
func TestBuildAcceptsEnvironmentNames(t *testing.T) {
	for _, name := range []string{"production", "default", "qa", "eu-west_1", "0", strings.Repeat("e", 63), " staging\n"} {
		t.Run(name, func(t *testing.T) {
			log := ldlogtest.NewMockLog()
			store, err := ldbigseg.BigSegmentStore().BaseURL("http://bigseg:8080").Environment(name).Build(clientContext(log))
			if err != nil {
				t.Fatal(err)
			}
			store.Close()
			want := "Big Segment store: bigseg at http://bigseg:8080, environment " + strings.TrimSpace(name)
			if !log.HasMessageMatch(ldlog.Info, regexp.QuoteMeta(want)+"$") {
				t.Errorf("no Info line %q; log: %v", want, log.GetAllOutput())
			}
		})
	}
}
