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

// HTTP is otelhttp's instrumentation of the chi router (handlers.Config.Trace): a server span
// per request, continuing the caller's trace, named by method and route pattern, and
// http.server.request.duration by route pattern; nil when neither provider is set. url.path is
// the route pattern (a path holds a context key, personal data); the query is never recorded;
// server.address is bigseg, never the Host sent. With no root traces and no metrics exported, a
// request without a trace context is not instrumented.
func (tel *Telemetry) HTTP() func(http.Handler) http.Handler {
	if tel == nil || tel.TracerProvider == nil && tel.MeterProvider == nil {
		return nil
	}
	opts := []otelhttp.Option{
		otelhttp.WithServerName(ServiceName + ":0"),                         // port 0: no server.port from the Host header either
		otelhttp.WithSpanOptions(trace.WithAttributes(semconv.URLPath(""))), // after otelhttp's url.path: it wins
		otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
	prop := tel.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	opts = append(opts, otelhttp.WithPropagators(prop))
	if tel.TracerProvider != nil {
		opts = append(opts, otelhttp.WithTracerProvider(tel.TracerProvider))
	}
	if tel.MeterProvider != nil {
		opts = append(opts, otelhttp.WithMeterProvider(tel.MeterProvider))
	} else if tel.noRoots {
		fields := prop.Fields()
		for i := range fields {
			fields[i] = http.CanonicalHeaderKey(fields[i])
		}
		opts = append(opts, otelhttp.WithFilter(func(r *http.Request) bool {
			for _, f := range fields {
				if len(r.Header[f]) > 0 {
					return true
				}
			}
			return false
		}))
	}
	instrument := otelhttp.NewMiddleware("", opts...)
	return func(next http.Handler) http.Handler {
		return instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			// otelhttp names the span and labels the metric by r.Pattern once the handler
			// returns: chi set it on its own copy of the request.
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				r.Pattern = rctx.RoutePattern()
			}
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() && r.Pattern != "" {
				span.SetAttributes(semconv.HTTPRoute(r.Pattern), semconv.URLPath(r.Pattern))
			}
		}))
	}
}
