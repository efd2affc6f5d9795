package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestTracesConfigured(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		// No variable: tracing stays off, so a bare `dirgate` sends nothing anywhere.
		{name: "nothing set", want: false},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, want: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, want: true},
		// An explicit exporter such as console turns it on without an endpoint.
		{name: "console exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: true},
		// "none" wins even over an endpoint, as the OTel spec says.
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TracesConfigured(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSetupExportsSpansAndMetrics(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{Version: "test", SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	ctx, span := otel.Tracer("test").Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")

	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "op" {
		t.Fatalf("spans = %v", spans)
	}
	if v, _ := spans[0].Resource.Set().Value("service.name"); v.AsString() != "dirgate" {
		t.Errorf("service.name = %q", v.AsString())
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	json.Unmarshal([]byte(lines[0]), &in)
	json.Unmarshal([]byte(lines[1]), &out)
	if in["trace_id"] != spans[0].SpanContext.TraceID().String() {
		t.Errorf("log line inside the span has trace_id %v, want %s", in["trace_id"], spans[0].SpanContext.TraceID())
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("log line outside any span has a trace_id: %v", out)
	}

	c, _ := otel.Meter("test").Int64Counter("dirgate_test_things")
	c.Add(context.Background(), 3)
	rec := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !bytes.Contains(body, []byte("dirgate_test_things_total 3")) || !bytes.Contains(body, []byte("go_goroutines")) {
		t.Fatalf("metrics exposition lacks the counter or Go metrics:\n%.2000s", body)
	}
}

func TestServiceNameFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "dirgate-eu")
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, span := otel.Tracer("test").Start(context.Background(), "op")
	span.End()
	if v, _ := exp.GetSpans()[0].Resource.Set().Value("service.name"); v.AsString() != "dirgate-eu" {
		t.Fatalf("service.name = %q, want the environment's", v.AsString())
	}
}
