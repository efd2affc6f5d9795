package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// serve sends one request through an HTTPServer around a handler that answers status
// with body, and returns the trace context the handler saw.
func serve(t *testing.T, s *HTTPServer, method, host, traceparent string, status int, body string) trace.SpanContext {
	t.Helper()
	var seen trace.SpanContext
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	r := httptest.NewRequest(method, "http://"+host+"/restApi/api/directoryObjects/groupMembers?group=x", strings.NewReader("abc"))
	if traceparent != "" {
		r.Header.Set("traceparent", traceparent)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	return seen
}

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestHTTPServerMetricsAreBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{Version: "test", SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	s := &HTTPServer{Route: func(*http.Request) string { return "/restApi/api/directoryObjects/groupMembers" }}
	// Hosts and methods a client makes up must not become labels.
	serve(t, s, "GET", "a.example", "", 200, "hello")
	serve(t, s, "GET", "b.example", "", 200, "hello")
	serve(t, s, "BREW", "c.example", "", 405, "")

	rec := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	exposition := rec.Body.String()
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/restApi/api/directoryObjects/groupMembers",network_protocol_name="http",network_protocol_version="1.1",url_scheme="http"} 2`,
		`http_server_request_duration_seconds_count{http_request_method="_OTHER",http_response_status_code="405",`,
		`http_server_response_body_size_bytes_sum{http_request_method="GET",http_response_status_code="200",http_route="/restApi/api/directoryObjects/groupMembers",network_protocol_name="http",network_protocol_version="1.1",url_scheme="http"} 10`,
		`http_server_request_body_size_bytes_sum{http_request_method="GET"`,
	} {
		if !strings.Contains(exposition, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	for _, never := range []string{"a.example", "BREW", "server_address"} {
		if strings.Contains(exposition, never) {
			t.Errorf("exposition holds %q", never)
		}
	}
	if t.Failed() {
		t.Log(exposition)
	}
	// Tracing off: no span, but the client's trace context reaches the handler (and
	// so the logs).
	sc := serve(t, s, "GET", "a.example", parent, 200, "")
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("handler saw trace %s", sc.TraceID())
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans without tracing", n)
	}
}

func TestHTTPServerSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{Version: "test", SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	s := &HTTPServer{Tracing: true, Route: func(*http.Request) string { return "/r" },
		Skip: func(r *http.Request) bool { return r.Method == "HEAD" }}
	sc := serve(t, s, "DELETE", "a.example", parent, 503, "")
	serve(t, s, "BREW", "a.example", "", 200, "")
	serve(t, s, "HEAD", "a.example", "", 200, "")

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2 (the skipped request has none)", len(spans))
	}
	sp := spans[0]
	if sp.Name != "DELETE /r" || sp.SpanKind != trace.SpanKindServer || sp.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		sp.SpanContext.SpanID() != sc.SpanID() || sp.Status.Code.String() != "Error" {
		t.Errorf("span %q kind %v parent %v status %v; handler saw %v", sp.Name, sp.SpanKind, sp.Parent, sp.Status, sc)
	}
	attrs := map[string]string{}
	for _, a := range sp.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range map[string]string{"http.route": "/r", "http.request.method": "DELETE", "http.response.status_code": "503", "url.scheme": "http"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if spans[1].Name != "HTTP /r" {
		t.Errorf("a made-up method's span is named %q", spans[1].Name)
	}
}
