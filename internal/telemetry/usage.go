package telemetry

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// variable is one OTEL_* variable as server -h lists it.
type variable struct{ name, typ, def, desc string }

// variables are the OTEL_* variables that matter to bigseg, read by OpenTelemetry's packages.
var variables = []variable{
	{"OTEL_SDK_DISABLED", "True or False", "false", "true turns OpenTelemetry off, whatever else is set"},
	{"OTEL_TRACES_EXPORTER", "String", "", "otlp, console (stdout) or none; unset means otlp if OTEL_EXPORTER_OTLP_ENDPOINT or _TRACES_ENDPOINT is set, else none; anything else stops the server"},
	{"OTEL_METRICS_EXPORTER", "String", "", "otlp, console, prometheus (a listener of its own, without bigseg's metrics) or none: bigseg's metrics (as /metrics has them, which stays) and http.server.request.duration; unset means otlp if OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, else none"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "String", "", "the collector's base URL for every signal (the exporters' default: https://localhost:4318, or localhost:4317 for grpc); setting it turns traces on unless OTEL_TRACES_EXPORTER says otherwise"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "String", "", "the collector's URL for traces only, used as is (http/protobuf: with its path, such as /v1/traces)"},
	{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "String", "", "the collector's URL for metrics only, used as is (http/protobuf: such as /v1/metrics)"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "String", "http/protobuf", "grpc or http/protobuf, anything else stops the server (also _TRACES_PROTOCOL, _METRICS_PROTOCOL)"},
	{"OTEL_EXPORTER_OTLP_HEADERS", "String", "", "key=value pairs, comma-separated, values percent-encoded, sent with every export, such as an API key (also _TRACES_HEADERS, _METRICS_HEADERS)"},
	{"OTEL_EXPORTER_OTLP_CERTIFICATE", "String", "", "PEM CA bundle to verify the collector with, instead of the system roots (also per signal)"},
	{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "String", "", "PEM client certificate, for collectors that require one (also per signal)"},
	{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "String", "", "PEM key of the client certificate (also per signal)"},
	{"OTEL_EXPORTER_OTLP_COMPRESSION", "String", "", "gzip or none (also per signal)"},
	{"OTEL_EXPORTER_OTLP_TIMEOUT", "Integer", "10000", "the exporter's bound of an export, in milliseconds (also per signal)"},
	{"OTEL_SERVICE_NAME", "String", ServiceName, "service.name of bigseg's telemetry"},
	{"OTEL_RESOURCE_ATTRIBUTES", "String", "", "more resource attributes: key=value pairs, comma-separated, values percent-encoded; a malformed one stops the server"},
	{"OTEL_PROPAGATORS", "String", "tracecontext,baggage", "how callers' trace context is read: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace or none, comma-separated"},
	{"OTEL_TRACES_SAMPLER", "String", "parentbased_always_on", "parentbased_always_on, parentbased_always_off, parentbased_traceidratio, always_on, always_off or traceidratio: parent-based ones follow the caller's traceparent"},
	{"OTEL_TRACES_SAMPLER_ARG", "String", "1", "the ratio of the traceidratio samplers, from 0 to 1"},
	{"OTEL_BSP_SCHEDULE_DELAY", "Integer", "5000", "milliseconds between two exports of spans"},
	{"OTEL_BSP_EXPORT_TIMEOUT", "Integer", "30000", "milliseconds one export of spans may take"},
	{"OTEL_BSP_MAX_QUEUE_SIZE", "Integer", "2048", "most spans waiting for export; beyond, spans are dropped"},
	{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "Integer", "512", "most spans in one export"},
	{"OTEL_METRIC_EXPORT_INTERVAL", "Integer", "60000", "milliseconds between two exports of metrics"},
	{"OTEL_METRIC_EXPORT_TIMEOUT", "Integer", "30000", "milliseconds one export of metrics may take"},
}

// Variables are the names of the OTEL_* variables server -h lists.
func Variables() []string {
	var names []string
	for _, v := range variables {
		names = append(names, v.name)
	}
	return names
}

// Usage lists the OTEL_* variables bigseg honours, in the layout of server -h's BIGSEG_* table.
func Usage(w io.Writer) error {
	fmt.Fprintf(w, "OpenTelemetry is configured by its standard variables; nothing is exported unless an\nexporter or an OTLP endpoint is set:\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE\tDEFAULT\tDESCRIPTION")
	for _, v := range variables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.name, v.typ, v.def, v.desc)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
