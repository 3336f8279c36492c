package main

import (
	dto_ "github.com/prometheus/client_model/go"

	"github.com/bigseg/bigseg/segments"
)

func hashOf(key string) string { return segments.Hash(key) }

// dto is one scraped metric family.
type dto struct{ *dto_.MetricFamily }

// value returns the value of the first series whose labels include the given name/value
// pairs (a counter, gauge or untyped value; a histogram's count).
func (f *dto) value(labels ...string) float64 {
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}
