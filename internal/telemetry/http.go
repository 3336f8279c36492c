package telemetry

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/semconv/v1.40.0/httpconv"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names the tracer and meter of the API.
const instrumentation = "github.com/bigseg/bigseg/handlers"

// tracing is the OpenTelemetry instrumentation of the API: a server span for every request,
// continuing the caller's trace, named by method and chi route pattern once routed, and
// http.server.request.duration. Neither ever holds a path, a query or a header of the
// request: paths hold context keys, queries hashes.
type tracing struct {
	tracer   trace.Tracer // nil: no spans
	prop     propagation.TextMapPropagator
	duration httpconv.ServerRequestDuration
	measured bool // duration is recorded
	start    []trace.SpanStartOption
	callers  bool // only requests with a traceparent are traced: the sampler begins no trace
}

// requestDurationBuckets are the boundaries the semantic conventions advise, in seconds.
var requestDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// HTTP is the API's instrumentation, to install on its chi router (handlers.Config.Trace):
// spans from TracerProvider, request durations from MeterProvider, the callers' trace context
// read by Propagator (W3C traceparent, tracestate and baggage when nil). Nil when neither
// provider is set: a request then runs no code of OpenTelemetry's at all. When the sampler
// Setup made samples no trace that bigseg would begin (parentbased_traceidratio of 0,
// parentbased_always_off, always_off), a request without a traceparent costs no extraction
// and no unsampled span either.
func (tel *Telemetry) HTTP() func(http.Handler) http.Handler {
	if tel == nil {
		return nil
	}
	t := newTracing(tel.TracerProvider, tel.MeterProvider, tel.Propagator)
	if t == nil {
		return nil
	}
	t.callers = tel.noRoots
	return t.middleware
}

func newTracing(tp trace.TracerProvider, mp metric.MeterProvider, prop propagation.TextMapPropagator) *tracing {
	if tp == nil && mp == nil {
		return nil
	}
	t := &tracing{prop: prop, start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}}
	if t.prop == nil {
		t.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if tp != nil {
		t.tracer = tp.Tracer(instrumentation)
	}
	if mp != nil {
		var err error
		t.duration, err = httpconv.NewServerRequestDuration(mp.Meter(instrumentation),
			metric.WithExplicitBucketBoundaries(requestDurationBuckets...))
		t.measured = err == nil
	}
	return t
}

func (t *tracing) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := r.Context()
		var span trace.Span
		if t.tracer != nil && (!t.callers || len(r.Header["Traceparent"]) > 0) {
			// The sampler decides first, on no more than the method; a request not sampled
			// costs the extraction and this Start, nothing else.
			ctx = t.prop.Extract(ctx, headerCarrier(r.Header))
			ctx, span = t.tracer.Start(ctx, spanMethod(r.Method), t.start...)
		}
		recording := span != nil && span.IsRecording()
		if !recording && !t.measured {
			next.ServeHTTP(w, r)
			return
		}
		if recording {
			r = r.WithContext(ctx)
		}
		rctx := chi.RouteContext(r.Context())
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			code := ww.Status()
			if code == 0 {
				code = http.StatusOK
			}
			route := ""
			if rctx != nil {
				route = rctx.RoutePattern()
			}
			attrs := t.attributes(r, route, code)
			if recording {
				t.end(span, r.Method, route, code, attrs)
			}
			if t.measured {
				t.duration.Record(ctx, time.Since(start).Seconds(), httpconv.RequestMethodAttr(semconvMethod(r.Method)), scheme(r), attrs[2:]...)
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

// attributes are the request's attributes: method and scheme first, then those of the
// metric too. The path is the route pattern, never the path requested (which holds a context
// key); a request of no route has neither.
func (t *tracing) attributes(r *http.Request, route string, code int) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(semconvMethod(r.Method)), semconv.URLScheme(scheme(r)),
		semconv.HTTPResponseStatusCode(code), semconv.NetworkProtocolVersion(protocolVersion(r)))
	if route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if code >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(code)))
	}
	return attrs
}

// end names the span by method and route, gives it its attributes, and ends it: a 5xx is
// an error of the server's, a 4xx the client's (unset status), as the conventions say.
func (t *tracing) end(span trace.Span, method, route string, code int, attrs []attribute.KeyValue) {
	if route != "" {
		span.SetName(spanMethod(method) + " " + route)
		attrs = append(attrs, semconv.URLPath(route))
	}
	span.SetAttributes(attrs...)
	if code >= 500 {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// semconvMethod is a standard method, or _OTHER, as the conventions want it: made-up methods
// never become attributes.
func semconvMethod(m string) string {
	if !standardMethod(m) {
		return "_OTHER"
	}
	return m
}

// spanMethod is the method as a span's name begins with it: HTTP for one not standard.
func spanMethod(m string) string {
	if !standardMethod(m) {
		return "HTTP"
	}
	return m
}

func standardMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func protocolVersion(r *http.Request) string {
	if r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		return "1.0"
	}
	return "1.1" // bigseg serves HTTP/1.1 alone
}

// headerCarrier is propagation.HeaderCarrier without its allocations: the propagators ask for
// their headers in lower case, which http.Header would canonicalize anew at every request.
type headerCarrier http.Header

var _ propagation.ValuesGetter = headerCarrier{}

// maxTraceState is the most of a caller's tracestate bigseg passes on: the 512 characters
// the W3C asks every vendor to propagate. A longer one is dropped whole (the trace goes on),
// since the SDK would copy up to 32 members of 512 bytes onto every span.
const maxTraceState = 512

// Values are the values of the header key (several baggage headers make one baggage).
func (h headerCarrier) Values(key string) []string {
	switch key {
	case "traceparent":
		return h["Traceparent"]
	case "tracestate":
		return h["Tracestate"]
	case "baggage":
		return h["Baggage"]
	}
	return http.Header(h).Values(key)
}

// Get is the header key; the tracestate headers make one list, as the W3C says, if it is
// no longer than maxTraceState.
func (h headerCarrier) Get(key string) string {
	vs := h.Values(key)
	switch {
	case len(vs) == 0:
		return ""
	case key != "tracestate":
		return vs[0]
	}
	if len(vs) > 1 {
		if n := len(vs) - 1 + len(strings.Join(vs, "")); n > maxTraceState {
			return ""
		}
		return strings.Join(vs, ",")
	}
	if len(vs[0]) > maxTraceState {
		return ""
	}
	return vs[0]
}

func (h headerCarrier) Set(key, value string) { http.Header(h).Set(key, value) }

func (h headerCarrier) Keys() []string { return propagation.HeaderCarrier(h).Keys() }
