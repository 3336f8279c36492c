package otlptest

import (
	"encoding/hex"
	"strconv"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// Attr returns the value of the attribute named key, if attrs has it.
func Attr(attrs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue(), true
		}
	}
	return nil, false
}

// AttrString returns the attribute named key as a string (its value's text for a bool, an int
// or a double), or "" if attrs has no such attribute.
func AttrString(attrs []*commonpb.KeyValue, key string) string {
	v, ok := Attr(attrs, key)
	if !ok {
		return ""
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.String()
}

// ID returns a trace or span id in hex, as traceparent writes it.
func ID(b []byte) string { return hex.EncodeToString(b) }
