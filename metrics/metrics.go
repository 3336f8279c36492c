// Package metrics keeps bigseg's Prometheus metrics on a registry that the caller owns. It
// implements segments.Observer for the domain's events and a handlers.RequestObserver for
// HTTP; no label ever carries a context key or hash.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets for latencies: lookups served from the cache take microseconds, Redis reads
// a fraction of a millisecond, timeouts up to seconds.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Metrics holds every bigseg metric.
type Metrics struct {
	reg prometheus.Registerer

	domain         domainVecs
	tlsOnce        sync.Once
	tlsFailing     prometheus.Gauge
	tlsFailures    prometheus.Counter
	tlsExpiry      prometheus.Gauge
	tokensOnce     sync.Once
	tokensFailing  prometheus.Gauge
	tokensFailures prometheus.Counter
	requests       *prometheus.CounterVec
	durations      *prometheus.HistogramVec
	http           sync.Map // seriesKey -> *series
}

// New registers bigseg's metrics on reg (the Go and process collectors are the caller's).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		tlsFailing: gauge("bigseg_tls_certificate_reload_failing",
			"1 while the TLS certificate files changed on disk but do not load (the last good certificate is served), else 0."),
		tlsFailures: counter("bigseg_tls_certificate_reload_errors_total",
			"Changes of the TLS certificate files on disk that did not load."),
		tlsExpiry: gauge("bigseg_tls_certificate_expiry_timestamp_seconds",
			"Unix time when the TLS certificate served on the HTTP listeners expires."),
		tokensFailing: gauge("bigseg_api_tokens_reload_failing",
			"1 while the API tokens file changed on disk but does not load (the last good tokens stay in force), else 0."),
		tokensFailures: counter("bigseg_api_tokens_reload_errors_total",
			"Changes of the API tokens file on disk that did not load."),
	}
	m.domain = newDomainVecs()
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bigseg_http_requests_total",
		Help: "HTTP requests, by chi route pattern, method and status code."}, []string{"route", "method", "code"})
	m.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bigseg_http_request_duration_seconds",
		Help: "Duration of HTTP requests, by chi route pattern and method.", Buckets: latencyBuckets}, []string{"route", "method"})
	reg.MustRegister(m.requests, m.durations)
	m.domain.register(reg)
	return m
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// BuildInfo exports the version bigseg was built as, and the Go version it was built with,
// as labels of bigseg_build_info, which is always 1.
func (m *Metrics) BuildInfo(version, goVersion string) {
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bigseg_build_info",
		Help: "1, labelled with the version bigseg was built as and the Go version."}, []string{"version", "goversion"})
	info.WithLabelValues(version, goVersion).Set(1)
	m.reg.MustRegister(info)
}

// WatchConnections exports the number of open client connections, read at each scrape.
func (m *Metrics) WatchConnections(open func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bigseg_http_open_connections",
		Help: "Client connections open on the API listener (at most BIGSEG_MAX_CONNS).",
	}, func() float64 { return float64(open()) }))
}

// TLSCertificate records the state of the HTTP listeners' certificate files: failing while
// the files on disk do not load (the last good certificate is still served), and when the
// certificate served expires.
func (m *Metrics) TLSCertificate(failing bool, notAfter time.Time) {
	m.tlsOnce.Do(func() { m.reg.MustRegister(m.tlsFailing, m.tlsFailures, m.tlsExpiry) })
	m.tlsFailing.Set(boolFloat(failing))
	if failing {
		m.tlsFailures.Inc()
	}
	m.tlsExpiry.Set(float64(notAfter.Unix()))
}

// APITokensFile records the state of the API tokens file: failing while the file on disk
// does not load (the last good tokens stay in force).
func (m *Metrics) APITokensFile(failing bool) {
	m.tokensOnce.Do(func() { m.reg.MustRegister(m.tokensFailing, m.tokensFailures) })
	m.tokensFailing.Set(boolFloat(failing))
	if failing {
		m.tokensFailures.Inc()
	}
}

// WatchReady exports whether the instance is ready for traffic (what /readyz says), read at
// each scrape: the "no instance ready" alert counts it across instances.
func (m *Metrics) WatchReady(ready func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bigseg_ready",
		Help: "1 if /readyz answers 200 (first poll done, store available, not shutting down), else 0.",
	}, func() float64 { return boolFloat(ready()) }))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// series is the metrics of one route, method and status code: kept once made, since every
// request observes one, and WithLabelValues hashes and formats the labels each time (the code
// as a string, an allocation). Labels come from fixed sets, so this holds a bounded number.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

type seriesKey struct {
	route, method string
	code          int
}

// ObserveRequest records one answered HTTP request; it has the signature of
// handlers.RequestObserver, which gives labels from fixed sets. A request that matched no
// route is labelled route="unmatched".
func (m *Metrics) ObserveRequest(route, method string, code int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	k := seriesKey{route, method, code}
	v, ok := m.http.Load(k)
	if !ok {
		v, _ = m.http.LoadOrStore(k, &series{requests: m.requests.WithLabelValues(route, method, strconv.Itoa(code)),
			duration: m.durations.WithLabelValues(route, method)})
	}
	s := v.(*series)
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}
