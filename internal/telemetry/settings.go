package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporters, as OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER name them.
const (
	exporterOTLP    = "otlp"
	exporterConsole = "console"
	exporterNone    = "none"
)

// OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	protocolGRPC = "grpc"
	protocolHTTP = "http/protobuf"
)

// settings are what bigseg decides from the OTEL_* variables: which exporter each signal has,
// and the values it passes to the SDK itself. The exporters read their connection settings
// (endpoint, headers, certificates, compression, timeout) from the environment on their own;
// readSettings only checks those, so that a bad one stops bigseg instead of being logged and
// ignored by the exporter.
type settings struct {
	traces, metrics  string // an exporter
	tracesProtocol   string // of otlp
	metricsProtocol  string
	sampler          sdktrace.Sampler
	noRoots          bool // the sampler samples no trace that bigseg begins
	queueSize, batch int
	batchDelay       time.Duration
	exportTimeout    time.Duration
	metricInterval   time.Duration
	metricTimeout    time.Duration
}

// readSettings reads and checks every OTEL_* variable bigseg honours; each error names its
// variable, never its value (headers hold API keys).
func readSettings(getenv func(string) string) (settings, error) {
	r := reader{getenv: getenv}
	s := settings{}
	disabled := r.boolean("OTEL_SDK_DISABLED")
	s.traces = r.exporter("OTEL_TRACES_EXPORTER", "TRACES")
	s.metrics = r.exporter("OTEL_METRICS_EXPORTER", "METRICS")
	s.tracesProtocol = r.protocol("TRACES")
	s.metricsProtocol = r.protocol("METRICS")
	for _, signal := range []string{"", "TRACES_", "METRICS_"} {
		r.otlpConnection(signal)
	}
	s.sampler, s.noRoots = r.sampler()
	s.queueSize = r.positive("OTEL_BSP_MAX_QUEUE_SIZE", sdktrace.DefaultMaxQueueSize, maxQueueSize)
	s.batch = r.positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", sdktrace.DefaultMaxExportBatchSize, maxQueueSize)
	if s.batch > s.queueSize && r.getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") != "" {
		r.fail("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "must be at most OTEL_BSP_MAX_QUEUE_SIZE (%d)", s.queueSize)
	}
	s.batch = min(s.batch, s.queueSize)
	s.batchDelay = r.millis("OTEL_BSP_SCHEDULE_DELAY", sdktrace.DefaultScheduleDelay, 0)
	s.exportTimeout = r.millis("OTEL_BSP_EXPORT_TIMEOUT", sdktrace.DefaultExportTimeout, 1)
	s.metricInterval = r.millis("OTEL_METRIC_EXPORT_INTERVAL", 60_000, 1)
	s.metricTimeout = r.millis("OTEL_METRIC_EXPORT_TIMEOUT", 30_000, 1)
	if r.getenv("OTEL_RESOURCE_ATTRIBUTES") != "" {
		r.resourceAttributes()
	}
	if disabled {
		s.traces, s.metrics = exporterNone, exporterNone
	}
	return s, errors.Join(r.errs...)
}

// reader reads variables, gathering every error.
type reader struct {
	getenv func(string) string
	errs   []error
}

func (r *reader) get(name string) string { return strings.TrimSpace(r.getenv(name)) }

func (r *reader) fail(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (r *reader) boolean(name string) bool {
	switch v := strings.ToLower(r.get(name)); v {
	case "", "false":
		return false
	case "true":
		return true
	}
	r.fail(name, "must be true or false")
	return false
}

// exporter is a signal's exporter: the variable's, or, unset, otlp when an OTLP endpoint
// asks for the signal, else none. The specification's default is otlp whatever is set;
// bigseg exports nothing, and dials no collector, unless told where to. Traces follow the
// general endpoint or their own; metrics, which /metrics already serves, only their own
// (or OTEL_METRICS_EXPORTER).
func (r *reader) exporter(name, signal string) string {
	switch v := r.get(name); v {
	case exporterOTLP, exporterConsole, exporterNone:
		return v
	case "":
		if signal == "TRACES" && r.get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || r.get("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "" {
			return exporterOTLP
		}
		return exporterNone
	}
	r.fail(name, "must be otlp, console or none (one exporter, not a list)")
	return exporterNone
}

// protocol is the OTLP protocol of a signal: its own variable's, else the general one's,
// else http/protobuf.
func (r *reader) protocol(signal string) string {
	p := protocolHTTP
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"} {
		switch v := r.get(name); v {
		case "":
		case protocolGRPC, protocolHTTP:
			p = v
		default:
			r.fail(name, "must be grpc or http/protobuf")
		}
	}
	return p
}

// otlpConnection checks the variables the OTLP exporters read themselves, for all signals
// (signal "") or one ("TRACES_"): the exporters would log a bad one and go on without it.
func (r *reader) otlpConnection(signal string) {
	prefix := "OTEL_EXPORTER_OTLP_" + signal
	if v := r.get(prefix + "ENDPOINT"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.fail(prefix+"ENDPOINT", "must be an http:// or https:// URL, such as http://localhost:4318")
		}
	}
	if v := r.get(prefix + "HEADERS"); v != "" {
		r.headers(prefix+"HEADERS", v)
	}
	if v := r.get(prefix + "CERTIFICATE"); v != "" {
		if b, err := os.ReadFile(v); err != nil {
			r.fail(prefix+"CERTIFICATE", "%v", err)
		} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
			r.fail(prefix+"CERTIFICATE", "%s holds no PEM certificate", v)
		}
	}
	cert, key := r.get(prefix+"CLIENT_CERTIFICATE"), r.get(prefix+"CLIENT_KEY")
	switch {
	case (cert == "") != (key == ""):
		r.fail(prefix+"CLIENT_CERTIFICATE", "and %sCLIENT_KEY go together", prefix)
	case cert != "":
		if _, err := loadKeyPair(cert, key); err != nil {
			r.fail(prefix+"CLIENT_CERTIFICATE", "%v", err)
		}
	}
	switch v := r.get(prefix + "COMPRESSION"); v {
	case "", "gzip", "none":
	default:
		r.fail(prefix+"COMPRESSION", "must be gzip or none")
	}
	r.millis(prefix+"TIMEOUT", 0, 1)
	r.boolean(prefix + "INSECURE")
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// headers checks key=value pairs, comma-separated, values percent-encoded, as the exporters
// read them. An error never quotes the value: headers carry credentials.
func (r *reader) headers(name, v string) {
	for i, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		decoded, err := url.PathUnescape(val)
		switch {
		case !ok || k == "":
			r.fail(name, "pair %d is not key=value", i+1)
		case strings.ContainsFunc(k, func(c rune) bool { return !isTokenChar(c) }):
			r.fail(name, "pair %d: the key is not a valid header name", i+1)
		case err != nil:
			r.fail(name, "pair %d: the value is not validly percent-encoded", i+1)
		case strings.ContainsFunc(decoded, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }):
			r.fail(name, "pair %d: the value holds a control character, which no header may", i+1)
		}
	}
}

// isTokenChar says whether c may be part of an HTTP header name (RFC 9110's tchar).
func isTokenChar(c rune) bool {
	return c < 0x7f && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.ContainsRune("!#$%&'*+-.^_`|~", c))
}

// maxQueueSize bounds the spans waiting for export: each holds a few KB, and the queue is
// made whole at start.
const maxQueueSize = 100_000

// maxResourceBytes bounds OTEL_RESOURCE_ATTRIBUTES, which every export carries.
const maxResourceBytes = 4096

// positive is an integer variable from 1 to most, or def when unset.
func (r *reader) positive(name string, def, most int) int {
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > most {
		r.fail(name, "must be a whole number from 1 to %d", most)
		return def
	}
	return n
}

// millis is a duration variable in milliseconds (as every OTEL_* duration is), at least
// least, or def ms.
func (r *reader) millis(name string, def, least int) time.Duration {
	v := r.get(name)
	if v == "" {
		return time.Duration(def) * time.Millisecond
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		r.fail(name, "must be a whole number of milliseconds, at least %d, such as 5000", least)
		return time.Duration(def) * time.Millisecond
	}
	return time.Duration(n) * time.Millisecond
}

// sampler is the sampler of OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, as the SDK
// reads them, but refusing what it would log and replace: parentbased_always_on by default.
func (r *reader) sampler() (sampler sdktrace.Sampler, noRoots bool) {
	ratio := 1.0
	if arg := r.get("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
		var err error
		if ratio, err = strconv.ParseFloat(arg, 64); err != nil || !(ratio >= 0 && ratio <= 1) { // NaN too
			r.fail("OTEL_TRACES_SAMPLER_ARG", "must be a ratio from 0 to 1, such as 0.1")
			ratio = 1
		}
	}
	switch v := strings.ToLower(r.get("OTEL_TRACES_SAMPLER")); v {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), false
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), true
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), ratio == 0
	case "always_on":
		return sdktrace.AlwaysSample(), false
	case "always_off":
		return sdktrace.NeverSample(), true
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), ratio == 0
	}
	r.fail("OTEL_TRACES_SAMPLER", "must be one of parentbased_always_on, parentbased_always_off, parentbased_traceidratio, always_on, always_off, traceidratio")
	return sdktrace.ParentBased(sdktrace.AlwaysSample()), false
}

// resourceAttributes checks OTEL_RESOURCE_ATTRIBUTES, as the SDK's resource.WithFromEnv reads
// it; the error never quotes a value.
func (r *reader) resourceAttributes() {
	if len(r.get("OTEL_RESOURCE_ATTRIBUTES")) > maxResourceBytes {
		r.fail("OTEL_RESOURCE_ATTRIBUTES", "is longer than %d bytes: every export carries it", maxResourceBytes)
		return
	}
	for i, pair := range strings.Split(r.get("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(pair, "=")
		if _, err := url.PathUnescape(v); !ok || strings.TrimSpace(k) == "" || err != nil {
			r.fail("OTEL_RESOURCE_ATTRIBUTES", "pair %d is not key=value (values percent-encoded)", i+1)
		}
	}
}
