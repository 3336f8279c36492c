package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	"github.com/launchdarkly/go-sdk-common/v3/ldvalue"
	ldeval "github.com/launchdarkly/go-server-sdk-evaluation/v3"
	"github.com/launchdarkly/go-server-sdk/v7/interfaces"
)

// fakeProvider answers as the wrapper would, from a map by context key.
type fakeProvider struct {
	memberships map[string]*membership
	status      ldreason.BigSegmentsStatus
}

func (f fakeProvider) GetMembership(key string) (ldeval.BigSegmentMembership, ldreason.BigSegmentsStatus) {
	if f.status == ldreason.BigSegmentsStoreError {
		return nil, f.status
	}
	return f.memberships[key], f.status
}

func (f fakeProvider) GetStatus() interfaces.BigSegmentStoreStatus {
	return interfaces.BigSegmentStoreStatus{Available: f.status != ldreason.BigSegmentsStoreError}
}

func TestLookup(t *testing.T) {
	alice := newMembership(hashKey("alice"), []string{"beta-users.g3", "both.g1"}, []string{"blocked-accounts.g1", "both.g1"})
	slash := newMembership(hashKey("org/acme"), nil, nil)
	tests := []struct {
		name     string
		path     string
		status   ldreason.BigSegmentsStatus
		wantCode int
		wantBody string
	}{
		{"included wins", "/memberships/alice", ldreason.BigSegmentsHealthy, 200,
			`{"contextKey":"alice","contextHash":"K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=","memberships":{"beta-users.g3":true,"blocked-accounts.g1":false,"both.g1":true},"status":"HEALTHY"}`},
		{"escaped key, no membership", "/memberships/org%2Facme", ldreason.BigSegmentsStale, 200,
			`{"contextKey":"org/acme","contextHash":"` + hashKey("org/acme") + `","memberships":{},"status":"STALE"}`},
		{"store error", "/memberships/alice", ldreason.BigSegmentsStoreError, 503,
			`{"contextKey":"alice","contextHash":"K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA=","status":"STORE_ERROR","error":"the Big Segment store could not be read"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakeProvider{memberships: map[string]*membership{"alice": alice, "org/acme": slash}, status: tt.status}
			h := newHandler(p, newStore(nil, "launchdarkly"))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.wantCode {
				t.Errorf("code %d, want %d", rec.Code, tt.wantCode)
			}
			if got := strings.TrimSuffix(rec.Body.String(), "\n"); got != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got, tt.wantBody)
			}
		})
	}
}

func TestMembershipChecksAsTheSDK(t *testing.T) {
	m := newMembership("h", []string{"a", "both"}, []string{"b", "both"})
	for ref, want := range map[string]ldvalue.OptionalBool{
		"a": ldvalue.NewOptionalBool(true), "b": ldvalue.NewOptionalBool(false),
		"both": ldvalue.NewOptionalBool(true), "none": {},
	} {
		if got := m.CheckMembership(ref); got != want {
			t.Errorf("CheckMembership(%q) = %v, want %v", ref, got, want)
		}
	}
}
