package ldbigseg_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/launchdarkly/go-sdk-common/v3/ldlog"
	"github.com/launchdarkly/go-sdk-common/v3/ldlogtest"
	"github.com/launchdarkly/go-sdk-common/v3/ldreason"
	"github.com/launchdarkly/go-server-sdk/v7/ldcomponents"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// defaultMaxBody is the most of a response the store reads with the default bounds:
// 6 × 64 KiB (every ref byte escaped) + 9 × 1,000 (each ref's punctuation) + 4 KiB.
const defaultMaxBody = 406312

// makeRefs returns n distinct segment refs whose lengths add up to total bytes: each starts
// with i written in the digits given (so they differ) and is padded with pad.
func makeRefs(n, total int, digits string, pad byte) []string {
	width := 1
	for p := len(digits); p < n; p *= len(digits) {
		width++
	}
	refs := make([]string, n)
	for i := range refs {
		size := total / n
		if i < total%n {
			size++
		}
		b := make([]byte, 0, size)
		for k, v := 0, i; k < width; k, v = k+1, v/len(digits) {
			b = append(b, digits[v%len(digits)])
		}
		for len(b) < size {
			b = append(b, pad)
		}
		refs[i] = string(b)
	}
	return refs
}

const (
	plainDigits = "0123456789abcdefghijklmnopqrstuvwxyz"
	// Bytes that encoding/json (as bigseg writes JSON) escapes as \u00XX: 6 bytes each (it
	// writes \b, \t, \n, \f and \r in 2).
	escapedDigits = "\x00\x01\x02\x03\x04\x05\x06\x07\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
	escapedPad    = '<'
)

// membershipsJSON is a lookup answer (HEALTHY, for hash unless it is "") listing refs, every
// other one excluded, as bigseg's encoding/json writes it.
func membershipsJSON(hash string, refs []string) []byte {
	m := make(map[string]bool, len(refs))
	for i, ref := range refs {
		m[ref] = i%2 == 0
	}
	b, err := json.Marshal(struct {
		ContextHash string          `json:"contextHash,omitempty"`
		Memberships map[string]bool `json:"memberships"`
		Status      string          `json:"status"`
	}{hash, m, "HEALTHY"})
	if err != nil {
		panic(err)
	}
	return b
}

// membershipOf is what GetMembership should return for an answer listing refs.
func membershipOf(refs []string) subsystems.BigSegmentMembership {
	var included, excluded []string
	for i, ref := range refs {
		if i%2 == 0 {
			included = append(included, ref)
		} else {
			excluded = append(excluded, ref)
		}
	}
	return ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, excluded)
}

// nearOneMiB is an answer of the hostile round: just under the old 1 MiB bound (59,000 refs of
// 9 bytes), a map that took an SDK with its cache of 1,000 contexts to 4 GB.
var nearOneMiB = membershipsJSON("", makeRefs(59000, 9*59000, plainDigits, 'g'))

// withSuffix returns refs with suffix appended to each.
func withSuffix(refs []string, suffix string) []string {
	out := make([]string, len(refs))
	for i, ref := range refs {
		out[i] = ref + suffix
	}
	return out
}

// TestMembershipBounds runs GetMembership against answers at and over each bound (MaxRefs,
// MaxRefBytes, and the body bound that follows from them), with the default bounds and with
// bounds set by the options. An answer over a bound is an error (ErrAnswerTooLarge) saying
// which bound, with no membership; one exactly at the bounds is accepted whole.
func TestMembershipBounds(t *testing.T) {
	const hash = hashWithEscapes
	type options func(*ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder
	defaults := func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b }
	tests := []struct {
		name    string
		options options
		refs    []string
		body    []byte // if not nil, the answer instead of membershipsJSON(hash, refs)
		wantErr wantErr
	}{
		{
			name: "exactly MaxRefs",
			refs: makeRefs(1000, 8000, plainDigits, 'r'),
		},
		{
			name:    "one ref over MaxRefs",
			refs:    makeRefs(1001, 8008, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 1000 segment refs (MaxRefs)"},
		},
		{
			name: "exactly MaxRefBytes, in long refs",
			refs: makeRefs(64, 64<<10, plainDigits, 'r'),
		},
		{
			name:    "one long ref over MaxRefBytes",
			refs:    makeRefs(65, 65<<10, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 65536 bytes of segment refs (MaxRefBytes)"},
		},
		{
			name:    "one byte over MaxRefBytes",
			refs:    makeRefs(1000, 64<<10+1, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 65536 bytes of segment refs (MaxRefBytes)"},
		},
		{
			name: "exactly at both bounds",
			refs: makeRefs(1000, 64<<10, plainDigits, 'r'),
		},
		{
			// The longest JSON an answer within the bounds can be: the body bound admits it.
			name: "exactly at both bounds, every ref byte escaped",
			refs: makeRefs(1000, 64<<10, escapedDigits, escapedPad),
		},
		{
			name: "bytes are UTF-8 bytes: exactly MaxRefBytes, mostly in two-byte characters",
			refs: withSuffix(makeRefs(512, 512*4, plainDigits, 'r'), strings.Repeat("é", 62)), // 128 bytes each
		},
		{
			name:    "bytes are UTF-8 bytes: one over MaxRefBytes",
			refs:    append(withSuffix(makeRefs(512, 512*4, plainDigits, 'r'), strings.Repeat("é", 62)), "x"),
			wantErr: wantErr{tooLarge: true, contains: "more than 65536 bytes of segment refs (MaxRefBytes)"},
		},
		{
			name:    "far over MaxRefs, within the body bound, chunked",
			refs:    makeRefs(30000, 90000, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 1000 segment refs (MaxRefs)"},
		},
		{
			// Decoding stops at the bound: what follows is never read.
			name:    "over MaxRefs, then not JSON",
			body:    []byte(`{"memberships":{"` + strings.Join(makeRefs(1001, 8008, plainDigits, 'r'), `":true,"`) + `":true, and then no JSON`),
			wantErr: wantErr{tooLarge: true, contains: "more than 1000 segment refs (MaxRefs)"},
		},
		{
			name:    "the hostile round's answer, just under 1 MiB",
			body:    nearOneMiB,
			wantErr: wantErr{tooLarge: true, contains: "more than 1000 segment refs (MaxRefs)"},
		},
		{
			name:    "MaxRefs(10): 10 refs",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b.MaxRefs(10) },
			refs:    makeRefs(10, 100, plainDigits, 'r'),
		},
		{
			name:    "MaxRefs(10): 11 refs",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b.MaxRefs(10) },
			refs:    makeRefs(11, 110, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 10 segment refs (MaxRefs)"},
		},
		{
			name:    "MaxRefBytes(100): 101 bytes",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b.MaxRefBytes(100) },
			refs:    makeRefs(10, 101, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 100 bytes of segment refs (MaxRefBytes)"},
		},
		{
			name:    "MaxRefBytes(100): the body bound follows (6 × 100 + 9 × 1,000 + 4 KiB)",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b.MaxRefBytes(100) },
			body:    []byte(`{"memberships":{},"status":"HEALTHY","pad":"` + strings.Repeat("x", 6*100+9*1000+4096) + `"}`),
			wantErr: wantErr{tooLarge: true, contains: "more than the 13696 bytes this store reads"},
		},
		{
			name: "raised bounds admit the hostile round's answer",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder {
				return b.MaxRefs(59000).MaxRefBytes(9 * 59000)
			},
			refs: makeRefs(59000, 9*59000, plainDigits, 'g'),
		},
		{
			name:    "zero and negative mean the defaults",
			options: func(b *ldbigseg.StoreBuilder) *ldbigseg.StoreBuilder { return b.MaxRefs(10).MaxRefs(0).MaxRefBytes(-1) },
			refs:    makeRefs(1001, 8008, plainDigits, 'r'),
			wantErr: wantErr{tooLarge: true, contains: "more than 1000 segment refs (MaxRefs)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil {
				body = membershipsJSON(hash, tt.refs)
			}
			f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body) // over 2 KiB: chunked, without a Content-Length
			})
			options := tt.options
			if options == nil {
				options = defaults
			}
			store := buildStore(t, options(ldbigseg.BigSegmentStore().BaseURL(f.URL).BearerToken(testToken)))

			got, err := store.GetMembership(hash)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr.any() {
				if got != nil {
					t.Errorf("membership %v with the error, want nil", got)
				}
				return
			}
			if diff := cmp.Diff(membershipOf(tt.refs), got); diff != "" {
				t.Errorf("membership (-want +got):\n%s", diff)
			}
		})
	}
}

// heapInuse is the heap in use after a full collection: what is still reachable, give or take
// partly used spans.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// retainedBound is the most heap that n answers within the default bounds may keep: each ref
// byte at most twice over (Go's allocation size classes), and 128 bytes per ref (its slot in
// a map that may be half empty, its string header, and the heap's fragmentation; about 80
// measured with refs of 3 bytes). For 1,000 answers, 247 MiB.
func retainedBound(n int) uint64 {
	return uint64(n) * (2*ldbigseg.DefaultMaxRefBytes + 128*ldbigseg.DefaultMaxRefs)
}

// TestMembershipBoundHoldsMemory keeps every answer of as many distinct contexts as the SDK's
// cache holds by default (ldcomponents.DefaultBigSegmentsContextCacheSize, 1,000), as the SDK does, from a
// hostile bigseg answering each with the same map, and checks the heap they keep: nothing for
// answers over the bounds, and at most retainedBound for answers exactly at them.
func TestMembershipBoundHoldsMemory(t *testing.T) {
	const contexts = ldcomponents.DefaultBigSegmentsContextCacheSize
	tests := []struct {
		name   string
		body   []byte
		wantOK bool
	}{
		{"the hostile round's answer, just under 1 MiB", nearOneMiB, false},
		{"30,000 refs, within the body bound", membershipsJSON("", makeRefs(30000, 90000, plainDigits, 'r')), false},
		{"exactly at both bounds", membershipsJSON("", makeRefs(1000, 64<<10, plainDigits, 'r')), true},
		{"1,000 refs of 3 bytes", membershipsJSON("", makeRefs(1000, 3000, plainDigits, 'r')), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(tt.body)
			})
			store := buildStore(t, ldbigseg.BigSegmentStore().BaseURL(f.URL))

			before := heapInuse()
			kept := make([]subsystems.BigSegmentMembership, 0, contexts)
			for i := range contexts {
				m, err := store.GetMembership(hashOf("context-" + strconv.Itoa(i)))
				if ok := err == nil; ok != tt.wantOK {
					t.Fatalf("lookup %d: error %v (want an error: %v)", i, err, !tt.wantOK)
				}
				if m != nil {
					kept = append(kept, m)
				}
			}
			grown := int64(heapInuse()) - int64(before)
			runtime.KeepAlive(kept)

			bound := retainedBound(contexts)
			if !tt.wantOK {
				bound = 8 << 20 // connections and buffers; no answer is kept
			}
			t.Logf("%d answers of %d bytes: %d kept, heap in use grew %.1f MiB (bound %.1f MiB)",
				contexts, len(tt.body), len(kept), float64(grown)/(1<<20), float64(bound)/(1<<20))
			if grown > int64(bound) {
				t.Errorf("the heap in use grew %d bytes, more than the bound of %d", grown, bound)
			}
		})
	}
}

// TestSDKUnderAHostileBigseg: a real SDK client (its cache at 1,000 contexts) evaluates more
// distinct contexts than it caches against a hostile bigseg answering every lookup with the
// hostile round's map. Every evaluation is STORE_ERROR, the SDK logs which bound was exceeded,
// and its process keeps none of the answers (4 GiB without the bounds).
func TestSDKUnderAHostileBigseg(t *testing.T) {
	f := newFakeBigseg(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/status" {
			fmt.Fprintf(w, `{"available":true,"lastSynchronizedOn":%d}`, time.Now().UnixMilli())
			return
		}
		w.Write(nearOneMiB)
	})
	log := ldlogtest.NewMockLog()
	client := sdkClient(t, f.URL, "", log)
	waitAvailable(t, client, true)

	before := heapInuse()
	const contexts = ldcomponents.DefaultBigSegmentsContextCacheSize + 200
	want := evaluation{notIn, ldreason.BigSegmentsStoreError}
	for i := range contexts {
		if got := evaluate(t, client, "context-"+strconv.Itoa(i), ""); got != want {
			t.Fatalf("context %d: got %+v, want %+v", i, got, want)
		}
	}
	grown := int64(heapInuse()) - int64(before)
	t.Logf("%d contexts: heap in use grew %.1f MiB", contexts, float64(grown)/(1<<20))
	// The SDK's own log of each error is in the MockLog: 1,200 lines of about 200 bytes.
	if grown > 8<<20 {
		t.Errorf("the heap in use grew %d bytes: the SDK kept answers over the bounds", grown)
	}
	if !log.HasMessageMatch(ldlog.Error, "over the store's bounds: more than 1000 segment refs \\(MaxRefs\\)") {
		t.Errorf("the SDK logged no error naming the bound: %v", logLines(log)[:min(5, len(logLines(log)))])
	}
}
