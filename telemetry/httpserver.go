package telemetry

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// HTTPServer instruments an HTTP handler the way OpenTelemetry's semantic conventions
// describe an HTTP server: a server span per request when tracing is on, and the
// http.server.request.duration, http.server.request.body.size and
// http.server.response.body.size histograms. It replaces otelhttp's handler on
// dirgate's request path, where that handler cost about a tenth of a cached
// listing's CPU (docs/benchmarks.md): it built and hashed a fresh attribute set and
// wrapped the body for every request, and it labelled metrics with the request's Host
// header, which a client chooses (a label per Host value). Here the labels are bounded
// (method, route, status, scheme, protocol version) and each combination's attribute
// set is built once.
type HTTPServer struct {
	// Route names the request's route (a template, never the raw path). Required.
	Route func(*http.Request) string
	// Skip, when set and true for a request, serves it without telemetry (probes and
	// scrapes would drown the traces that matter).
	Skip func(*http.Request) bool
	// Tracing starts a server span per request. Without it the client's trace
	// context is still extracted, so that its trace id reaches the logs.
	Tracing bool

	once sync.Once
	inst serverInstruments
	sets sync.Map // serverKey → metric.MeasurementOption
}

type serverInstruments struct {
	duration                    metric.Float64Histogram
	requestBytes, responseBytes metric.Int64Histogram
}

// serverKey is one combination of metric labels: all from bounded sets.
type serverKey struct {
	method, route, proto string
	status               int
	tls                  bool
}

// Handler wraps next.
func (s *HTTPServer) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Skip != nil && s.Skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.once.Do(s.init)
		start := time.Now()
		k := serverKey{method: boundedMethod(r.Method), route: s.Route(r), proto: protoVersion(r), tls: r.TLS != nil}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		var span trace.Span
		if s.Tracing {
			name := k.method + " " + k.route
			if k.method == "_OTHER" {
				name = "HTTP " + k.route
			}
			peer, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				peer = r.RemoteAddr
			}
			ctx, span = otel.Tracer("github.com/dirgate/dirgate/telemetry").Start(ctx, name,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(k.method), semconv.HTTPRoute(k.route),
					semconv.URLScheme(k.scheme()), semconv.NetworkProtocolVersion(k.proto),
					semconv.NetworkPeerAddress(peer)))
		}
		cw := RecordResponse(w)
		if ctx != r.Context() { // a client's trace context or baggage, or a span
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(cw, r)
		k.status = cw.Status
		if k.status == 0 {
			k.status = http.StatusOK
		}
		if span != nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(k.status))
			if k.status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			span.End()
		}
		set := s.set(k)
		s.inst.duration.Record(ctx, time.Since(start).Seconds(), set)
		s.inst.requestBytes.Record(ctx, max(r.ContentLength, 0), set)
		s.inst.responseBytes.Record(ctx, cw.Bytes, set)
	})
}

func (s *HTTPServer) init() {
	m := otel.Meter("github.com/dirgate/dirgate/telemetry")
	// The names and units of OpenTelemetry's HTTP server metrics, which the
	// Prometheus exporter exposes as http_server_request_duration_seconds,
	// http_server_request_body_size_bytes and http_server_response_body_size_bytes.
	s.inst.duration, _ = m.Float64Histogram("http.server.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests."))
	s.inst.requestBytes, _ = m.Int64Histogram("http.server.request.body.size", metric.WithUnit("By"),
		metric.WithDescription("Size of HTTP server request bodies."))
	s.inst.responseBytes, _ = m.Int64Histogram("http.server.response.body.size", metric.WithUnit("By"),
		metric.WithDescription("Size of HTTP server response bodies."))
}

func (s *HTTPServer) set(k serverKey) metric.MeasurementOption {
	if o, ok := s.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(
		semconv.HTTPRequestMethodKey.String(k.method), semconv.HTTPRoute(k.route),
		semconv.HTTPResponseStatusCode(k.status), semconv.URLScheme(k.scheme()),
		semconv.NetworkProtocolName("http"), semconv.NetworkProtocolVersion(k.proto)))
	v, _ := s.sets.LoadOrStore(k, o)
	return v.(metric.MeasurementOption)
}

// boundedMethod is the semantic conventions' http.request.method: a known method, or
// _OTHER for anything a client made up.
func boundedMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

func protoVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		return "1.1"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "1.0"
	case r.ProtoMajor == 2:
		return "2"
	}
	return strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor%10)
}

func (k serverKey) scheme() string {
	if k.tls {
		return "https"
	}
	return "http"
}

// StatusWriter records the status and the bytes of a response, for the HTTP server
// metrics here and for the API's request log (proxy): one wrapper per request.
type StatusWriter struct {
	http.ResponseWriter
	Status int // the final status written; 0 while nothing was
	Bytes  int64
}

// RecordResponse returns w itself when it already records (a handler served by
// HTTPServer), or w wrapped.
func RecordResponse(w http.ResponseWriter) *StatusWriter {
	if sw, ok := w.(*StatusWriter); ok {
		return sw
	}
	return &StatusWriter{ResponseWriter: w}
}

func (w *StatusWriter) WriteHeader(status int) {
	if w.Status == 0 && status >= 200 { // 1xx responses are interim
		w.Status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (read deadlines, flushes).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps http.Flusher visible to handlers that type-assert for it.
func (w *StatusWriter) Flush() {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // http.Flusher has no error either
}
