package ldbigseg_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// TestEnvironmentRequests checks the routes a store with Environment asks (those under
// /environments/{name}/, below the base URL's path), and that "" keeps the unscoped ones.
func TestEnvironmentRequests(t *testing.T) {
	tests := []struct {
		environment string
		wantPaths   []string
	}{
		{"staging", []string{"/behind/proxy/environments/staging/memberships", "/behind/proxy/environments/staging/status"}},
		{" eu-west_1\n", []string{"/behind/proxy/environments/eu-west_1/memberships", "/behind/proxy/environments/eu-west_1/status"}},
		{"default", []string{"/behind/proxy/environments/default/memberships", "/behind/proxy/environments/default/status"}},
		{"", []string{"/behind/proxy/memberships", "/behind/proxy/status"}},
	}
	for _, tt := range tests {
		t.Run(tt.environment, func(t *testing.T) {
			f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/status") {
					answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1}`)(w, r)
					return
				}
				answer(200, "application/json", `{"memberships":{},"status":"HEALTHY"}`)(w, r)
			})
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL+"/behind/proxy/").Environment(tt.environment).BearerToken(testToken))
			if _, err := store.GetMembership(hashWithEscapes); err != nil {
				t.Fatal(err)
			}
			if _, err := store.GetMetadata(); err != nil {
				t.Fatal(err)
			}
			type request struct{ Path, RawQuery, Authorization string }
			var got []request
			for _, r := range f.Requests() {
				got = append(got, request{r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization")})
			}
			want := []request{
				{tt.wantPaths[0], "contextHash=YeoIA%2FiFNSO3d9QUrOMTDNTT%2BS3izX%2F4aVwzfXnC7u4%3D", "Bearer " + testToken},
				{tt.wantPaths[1], "", "Bearer " + testToken},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnvironmentAnswers maps the answers that concern environments, bigseg's own (see
// handlers/environments.go and internal/auth/auth.go), for a store with Environment and one
// without: an HTTPError with the status code and a hint saying what to change.
func TestEnvironmentAnswers(t *testing.T) {
	const served = "production, staging, qa"
	tests := []struct {
		name        string
		environment string
		handler     http.HandlerFunc
		membership  wantErr
		status      wantErr
	}{
		{
			name:        "404: an environment not served",
			environment: "prod",
			handler:     answer(404, "application/json", `{"error":"no environment prod: the environments served are `+served+`"}`),
			membership:  wantErr{httpStatus: 404, contains: `HTTP 404 (bigseg does not serve environment "prod", or the base URL is not bigseg's): no environment prod: the environments served are ` + served},
			status:      wantErr{httpStatus: 404, contains: `bigseg does not serve environment "prod"`},
		},
		{
			name:        "403: the token does not open the environment",
			environment: "production",
			handler:     answer(403, "application/json", `{"error":"this token does not open environment production"}`),
			membership:  wantErr{httpStatus: 403, contains: `HTTP 403 (the bearer token does not open environment "production"): this token does not open environment production`},
			status:      wantErr{httpStatus: 403, contains: `the bearer token does not open environment "production"`},
		},
		{
			name:    "404 unscoped: several environments served",
			handler: answer(404, "application/json", `{"error":"several environments are served (`+served+`): ask under /environments/{env}/, such as /environments/production/memberships"}`),
			membership: wantErr{httpStatus: 404, contains: "HTTP 404 (no such route: is the base URL bigseg's? One serving several environments needs Environment set): " +
				"several environments are served (" + served + ")"},
			status: wantErr{httpStatus: 404, contains: "needs Environment set"},
		},
		{
			name:       "403 unscoped: a scoped token",
			handler:    answer(403, "application/json", `{"error":"this token does not open every environment: ask for one, under /environments/{env}/"}`),
			membership: wantErr{httpStatus: 403, contains: "HTTP 403 (forbidden: a bearer token scoped to some environments needs Environment set to one of them): this token does not open every environment"},
			status:     wantErr{httpStatus: 403, contains: "needs Environment set"},
		},
		{
			name: "unscoped /status of several environments",
			handler: answer(200, "application/json", `{"environments":{"staging":{"available":true,"lastSynchronizedOn":1,"environment":"staging"},`+
				`"production":{"available":true,"lastSynchronizedOn":2,"environment":"production"}}}`),
			status: wantErr{contains: "bigseg status: bigseg serves several environments (production, staging): set the store's Environment to one of them"},
		},
		{
			name:        "a status of another environment",
			environment: "staging",
			handler:     answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1,"environment":"production"}`),
			status:      wantErr{contains: `the answer is for environment "production", not "staging"`},
		},
		{
			name:        "a status naming its environment",
			environment: "staging",
			handler:     answer(200, "application/json", `{"available":true,"lastSynchronizedOn":1,"environment":"staging"}`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBigseg(t, tt.handler)
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL).Environment(tt.environment).BearerToken(testToken))
			if tt.membership.any() {
				m, err := store.GetMembership(hashWithEscapes)
				checkErr(t, err, tt.membership)
				if m != nil {
					t.Errorf("membership %v with the error, want nil", m)
				}
			}
			_, err := store.GetMetadata()
			checkErr(t, err, tt.status)
		})
	}
}
