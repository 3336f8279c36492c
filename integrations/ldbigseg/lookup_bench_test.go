package ldbigseg_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bigseg/bigseg/integrations/ldbigseg"
)

// memoryTransport answers every request with body, from memory: no connection, so that a
// benchmark measures the store's own work on an answer (the HTTP client's, reading and
// decoding the body, checking the bounds, building the membership).
type memoryTransport struct{ body []byte }

func (m memoryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(m.body)),
		// ContentLength -1: read as a chunked answer is, up to the store's body bound.
		ContentLength: -1,
		Request:       r,
	}, nil
}

// shortRefs is a hostile answer of n refs of 3 bytes, n the most thousands of them that the
// body bound lets through at the default bounds.
func shortRefs() (body []byte, n int) {
	for len(membershipsJSON("", makeRefs(n+1000, 3*(n+1000), plainDigits, 'r'))) < defaultMaxBody {
		n += 1000
	}
	return membershipsJSON("", makeRefs(n, 3*n, plainDigits, 'r')), n
}

// BenchmarkGetMembership measures one lookup's CPU and allocations in the store, on answers of
// a usual size, at the bounds, and over them (hostile): bytes/op of an answer over the bounds
// is what the store allocates before refusing it, none of which it keeps. cpu-ns/op is the
// process's CPU time per lookup (the garbage collector's included).
func BenchmarkGetMembership(b *testing.B) {
	hostile, n := shortRefs()
	cases := []struct {
		name     string
		body     []byte
		tooLarge bool
	}{
		{"3 refs", membershipsJSON(hashWithEscapes, []string{"beta-users.g3", "blocked.g1", "vip.g2"}), false},
		{"10 refs of 20 bytes", membershipsJSON(hashWithEscapes, makeRefs(10, 200, plainDigits, 'r')), false},
		{"100 refs of 20 bytes", membershipsJSON(hashWithEscapes, makeRefs(100, 2000, plainDigits, 'r')), false},
		{"1,000 refs, 64 KiB: at both bounds", membershipsJSON(hashWithEscapes, makeRefs(1000, 64<<10, plainDigits, 'r')), false},
		{"hostile: 30,000 refs within the body bound", membershipsJSON("", makeRefs(30000, 90000, plainDigits, 'r')), true},
		{"hostile: " + strconv.Itoa(n) + " refs of 3 bytes, the body bound", hostile, true},
		{"hostile: the hostile round's answer, just under 1 MiB", nearOneMiB, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s, err := ldbigseg.BigSegmentStore().BaseURL("http://bigseg.invalid").
				HTTPClient(&http.Client{Transport: memoryTransport{c.body}}).Build(clientContext(nil))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				_, err := s.GetMembership(hashWithEscapes)
				if errors.Is(err, ldbigseg.ErrAnswerTooLarge) != c.tooLarge || (err != nil && !c.tooLarge) {
					b.Fatalf("error %v (want ErrAnswerTooLarge: %v)", err, c.tooLarge)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used, in user and system mode, on all its threads
// (the garbage collector's too): on a shared machine, a steadier figure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
