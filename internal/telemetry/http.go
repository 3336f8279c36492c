package telemetry

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// HTTP is the API's instrumentation, otelhttp's, to install on its chi router
// (handlers.Config.Trace): a server span for every request, continuing the caller's trace
// (read by Propagator; W3C traceparent, tracestate and baggage when nil), named by method and
// chi route pattern, and http.server.request.duration by route pattern. Nil when neither
// provider is set: a request then runs no code of OpenTelemetry's at all.
//
// The path requested holds a context key, which is personal data: url.path is the route
// pattern (empty for a request of no route), never the path, from the span's start; the
// query is never recorded. server.address is bigseg, never the Host header a caller sent, so
// that the metric's series stay bounded.
func (tel *Telemetry) HTTP() func(http.Handler) http.Handler {
	if tel == nil || tel.TracerProvider == nil && tel.MeterProvider == nil {
		return nil
	}
	opts := []otelhttp.Option{
		otelhttp.WithServerName(ServiceName + ":0"),                         // port 0: no server.port from the Host header either
		otelhttp.WithSpanOptions(trace.WithAttributes(semconv.URLPath(""))), // after otelhttp's url.path: it wins
		otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
	}
	if tel.TracerProvider != nil {
		opts = append(opts, otelhttp.WithTracerProvider(tel.TracerProvider))
	}
	if tel.MeterProvider != nil {
		opts = append(opts, otelhttp.WithMeterProvider(tel.MeterProvider))
	}
	if tel.Propagator != nil {
		opts = append(opts, otelhttp.WithPropagators(tel.Propagator))
	}
	instrument := otelhttp.NewMiddleware("", opts...)
	return func(next http.Handler) http.Handler {
		return instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			// otelhttp names the span and labels the metric by r.Pattern once the handler
			// returns: chi set it on its own copy of the request.
			if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePattern() != "" {
				r.Pattern = rctx.RoutePattern()
				trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(r.Pattern), semconv.URLPath(r.Pattern))
			}
		}))
	}
}
