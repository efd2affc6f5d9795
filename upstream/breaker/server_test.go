package breaker

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

const dc1, dc2 = "ldaps://dc1:636", "ldaps://dc2:636"

// Server has the method set of upstream/ldap's Breaker interface.
var _ interface {
	Allow() (done func(err error), err error)
	Open() bool
} = (*Server)(nil)

// try asks b for one call and reports outcome as the call's result; it returns
// Allow's refusal, if any.
func try(b *Server, outcome error) error {
	done, err := b.Allow()
	if err != nil {
		return err
	}
	done(outcome)
	return nil
}

// TestServerTrips: each infrastructure code opens the breaker after the threshold,
// and an open breaker refuses with EUNAVAILABLE, a client message without the server
// and a wrapped error that names it.
func TestServerTrips(t *testing.T) {
	for _, failure := range []error{errUpstream, errTimeout} {
		t.Run(dirgate.ErrorCode(failure), func(t *testing.T) {
			b := NewServer(Settings{Name: "ldap", FailureThreshold: 3, OpenTimeout: time.Hour}, dc1)
			defer b.Close()
			for i := 0; i < 3; i++ {
				if b.Open() {
					t.Fatalf("open after %d failures, want closed until 3", i)
				}
				if err := try(b, failure); err != nil {
					t.Fatalf("call %d refused: %v", i, err)
				}
			}
			if !b.Open() || b.State() != StateOpen {
				t.Fatalf("Open() = %v, State() = %v after 3 failures, want open", b.Open(), b.State())
			}
			done, err := b.Allow()
			if done != nil || dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
				t.Fatalf("open breaker: done = %v, err = %v, want no done and %s", done != nil, err, dirgate.EUNAVAILABLE)
			}
			if !errors.Is(err, gobreaker.ErrOpenState) {
				t.Errorf("refusal %v does not wrap gobreaker.ErrOpenState", err)
			}
			if msg := dirgate.ErrorMessage(err); msg != "The directory is unavailable; try again later." {
				t.Errorf("client message = %q", msg)
			}
			if !strings.Contains(err.Error(), dc1) {
				t.Errorf("refusal %q does not name the server", err)
			}
		})
	}
}

// TestServerAnswersDoNotTrip: answers and cancellations, far more than the
// threshold, leave it closed, and an answer between failures resets the count.
func TestServerAnswersDoNotTrip(t *testing.T) {
	answers := []error{
		nil,
		dirgate.Errorf(dirgate.ENOTFOUND, "not found"),
		dirgate.Errorf(dirgate.EINVALID, "bad"),
		dirgate.Errorf(dirgate.EFORBIDDEN, "no"),
		fmt.Errorf("x: %w", dirgate.ErrNotMember),
		fmt.Errorf("x: %w", dirgate.ErrAlreadyMember),
		dirgate.WrapError(dirgate.ECANCELED, "gone", context.Canceled),
		context.Canceled,
	}
	b := NewServer(Settings{FailureThreshold: 2, OpenTimeout: time.Hour}, dc1)
	defer b.Close()
	for i := 0; i < 5; i++ {
		for _, a := range answers {
			if err := try(b, a); err != nil {
				t.Fatalf("refused after answer %v: %v", a, err)
			}
		}
	}
	for _, e := range []error{errUpstream, dirgate.Errorf(dirgate.ENOTFOUND, "x"), errUpstream} {
		if err := try(b, e); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != StateClosed {
		t.Fatalf("State() = %v, want closed", b.State())
	}
	// A cancellation is no success either: it leaves two failures consecutive.
	for _, e := range []error{context.Canceled, errUpstream} {
		if err := try(b, e); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != StateOpen {
		t.Fatalf("State() = %v after failure, cancellation, failure; want open", b.State())
	}
}

// TestServerHalfOpen walks the cycle: open, half-open after the timeout with one
// probe admitted and the next refused (not Open), a failed probe reopens, a good one
// closes. Every transition reaches OnServerStateChange with the server.
func TestServerHalfOpen(t *testing.T) {
	var mu sync.Mutex
	var transitions []string
	b := NewServer(Settings{
		Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Millisecond,
		OnServerStateChange: func(name, server string, from, to State) {
			mu.Lock()
			defer mu.Unlock()
			transitions = append(transitions, fmt.Sprintf("%s %s:%v->%v", name, server, from, to))
		},
		OnStateChange: func(string, State, State) { t.Error("OnStateChange called beside OnServerStateChange") },
	}, dc1)
	defer b.Close()
	if err := try(b, errUpstream); err != nil {
		t.Fatal(err)
	}
	waitServerHalfOpen(t, b)
	probe, err := b.Allow()
	if err != nil {
		t.Fatalf("first probe refused: %v", err)
	}
	_, err = b.Allow()
	if dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE || !errors.Is(err, gobreaker.ErrTooManyRequests) {
		t.Fatalf("second request while probing: %v, want EUNAVAILABLE wrapping ErrTooManyRequests", err)
	}
	if b.Open() {
		t.Error("Open() = true while half-open with its probe taken, want false")
	}
	probe(errTimeout)
	if !b.Open() {
		t.Fatalf("State() = %v after a failed probe, want open", b.State())
	}
	waitServerHalfOpen(t, b)
	if err := try(b, nil); err != nil {
		t.Fatal(err)
	}
	if b.State() != StateClosed || b.Open() {
		t.Fatalf("State() = %v after a good probe, want closed", b.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	for i := range want {
		want[i] = "ldap " + dc1 + ":" + want[i]
	}
	if fmt.Sprint(transitions) != fmt.Sprint(want) {
		t.Errorf("transitions = %v, want %v", transitions, want)
	}
}

// TestServerCanceledProbeFreesSlot: a canceled probe neither closes nor reopens the
// breaker, and the next request may probe.
func TestServerCanceledProbeFreesSlot(t *testing.T) {
	b := NewServer(Settings{FailureThreshold: 1, OpenTimeout: time.Millisecond}, dc1)
	defer b.Close()
	_ = try(b, errUpstream)
	waitServerHalfOpen(t, b)
	if err := try(b, dirgate.WrapError(dirgate.ECANCELED, "gone", context.Canceled)); err != nil {
		t.Fatal(err)
	}
	if b.State() != StateHalfOpen {
		t.Fatalf("State() = %v after a canceled probe, want half-open", b.State())
	}
	if err := try(b, nil); err != nil {
		t.Fatalf("next probe refused: %v", err)
	}
	if b.State() != StateClosed {
		t.Fatalf("State() = %v, want closed", b.State())
	}
}

// TestServerDoneOnce: a done called twice counts once.
func TestServerDoneOnce(t *testing.T) {
	b := NewServer(Settings{FailureThreshold: 2, OpenTimeout: time.Hour}, dc1)
	defer b.Close()
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errUpstream)
	done(errUpstream)
	if b.State() != StateClosed {
		t.Fatalf("State() = %v after one failure reported twice, want closed", b.State())
	}
}

// TestServersIndependent: one server's failures leave another's breaker closed.
func TestServersIndependent(t *testing.T) {
	s := Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Hour}
	a, b := NewServer(s, dc1), NewServer(s, dc2)
	defer a.Close()
	defer b.Close()
	_ = try(a, errUpstream)
	if !a.Open() || b.Open() {
		t.Fatalf("Open(): %s %v, %s %v; want only %s open", dc1, a.Open(), dc2, b.Open(), dc1)
	}
	if err := try(b, nil); err != nil {
		t.Fatalf("%s refused: %v", dc2, err)
	}
	if a.Server() != dc1 || b.Server() != dc2 {
		t.Errorf("Server() = %q, %q", a.Server(), b.Server())
	}
}

// TestServerStateChangeFallback: without OnServerStateChange, OnStateChange hears
// the transition under "name server".
func TestServerStateChangeFallback(t *testing.T) {
	var got []string
	b := NewServer(Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Hour,
		OnStateChange: func(name string, from, to State) { got = append(got, fmt.Sprintf("%s:%v->%v", name, from, to)) },
	}, dc1)
	defer b.Close()
	_ = try(b, errUpstream)
	if want := "[ldap " + dc1 + ":closed->open]"; fmt.Sprint(got) != want {
		t.Errorf("OnStateChange heard %v, want %s", got, want)
	}
}

func TestServerDefaults(t *testing.T) {
	b := NewServer(Settings{}, dc1)
	defer b.Close()
	for i := 0; i < DefaultFailureThreshold-1; i++ {
		_ = try(b, errUpstream)
	}
	if b.Open() {
		t.Fatalf("open after %d failures", DefaultFailureThreshold-1)
	}
	_ = try(b, errUpstream)
	if !b.Open() {
		t.Fatalf("closed after %d failures", DefaultFailureThreshold)
	}
}

// TestServerConcurrent runs calls, state reads and scrapes at once (for -race), and
// checks that a probe storm on a half-open breaker admits at most one probe.
func TestServerConcurrent(t *testing.T) {
	r := newMetricReader(t)
	b := NewServer(Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Millisecond}, dc1)
	defer b.Close()
	_ = try(b, errUpstream)
	waitServerHalfOpen(t, b)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []func(error)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if done, err := b.Allow(); err == nil {
				mu.Lock()
				admitted = append(admitted, done)
				mu.Unlock()
			}
			_ = b.Open()
			_ = r.Collect(context.Background(), &metricdata.ResourceMetrics{})
		}()
	}
	wg.Wait()
	if len(admitted) != 1 {
		t.Fatalf("%d probes admitted while half-open, want 1", len(admitted))
	}
	admitted[0](nil)
	// Closed: concurrent calls all pass and their answers keep it closed.
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := try(b, dirgate.Errorf(dirgate.ENOTFOUND, "x")); err != nil {
				t.Errorf("refused while closed: %v", err)
			}
		}()
	}
	wg.Wait()
	if b.State() != StateClosed {
		t.Fatalf("State() = %v, want closed", b.State())
	}
}

// TestServerStateMetric: each live Server has its own series on the state gauge,
// following its state, and loses it at Close; the whole-directory series is apart.
func TestServerStateMetric(t *testing.T) {
	r := newMetricReader(t)
	s := Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Hour}
	New(&fakeDir{}, Settings{Name: "ldap", TelemetryOnly: true})
	a, b := NewServer(s, dc1), NewServer(s, dc2)
	defer b.Close()
	_ = try(a, errUpstream)

	series := stateSeries(t, r)
	want := map[string]int64{"upstream=ldap": 0, "server=" + dc1 + ",upstream=ldap": 2, "server=" + dc2 + ",upstream=ldap": 0}
	if fmt.Sprint(series) != fmt.Sprint(want) {
		t.Fatalf("series = %v, want %v", series, want)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	delete(want, "server="+dc1+",upstream=ldap")
	if series := stateSeries(t, r); fmt.Sprint(series) != fmt.Sprint(want) {
		t.Fatalf("after Close: series = %v, want %v", series, want)
	}
	// Closed, the breaker still works for calls in flight.
	if err := try(a, nil); dirgate.ErrorCode(err) != dirgate.EUNAVAILABLE {
		t.Errorf("closed Server's open breaker: %v, want still refusing", err)
	}
}

// TestTelemetryOnly: the whole-directory breaker never opens, every call reaches
// the directory with its error unchanged (an inner EUNAVAILABLE too: the per-server
// breakers refused), durations are recorded by outcome, and the gauge says closed.
func TestTelemetryOnly(t *testing.T) {
	r := newMetricReader(t)
	f := &fakeDir{err: errUpstream}
	var changes int
	d := New(f, Settings{Name: "ldap", TelemetryOnly: true, FailureThreshold: 1, OpenTimeout: time.Hour,
		OnStateChange: func(string, State, State) { changes++ }})
	const n = 10
	for i := 0; i < n; i++ {
		if _, err := d.Lookup(context.Background(), testID, nil); !errors.Is(err, errUpstream) {
			t.Fatalf("call %d: %v, want the inner error", i, err)
		}
	}
	refused := dirgate.WrapError(dirgate.EUNAVAILABLE, "The directory is unavailable; try again later.", gobreaker.ErrOpenState)
	f.set(refused)
	if _, err := d.Members(context.Background(), dirgate.Object{}, nil); !errors.Is(err, refused) {
		t.Fatalf("inner refusal: %v, want it unchanged", err)
	}
	if f.count() != n+1 {
		t.Fatalf("directory called %d times, want %d", f.count(), n+1)
	}
	if d.State() != StateClosed || changes != 0 {
		t.Fatalf("State() = %v after %d transitions, want closed and none", d.State(), changes)
	}
	if got := stateSeries(t, r); fmt.Sprint(got) != "map[upstream=ldap:0]" {
		t.Errorf("state series = %v, want upstream=ldap closed", got)
	}
	counts := durationCounts(t, r)
	want := map[string]uint64{"lookup upstreamError": n, "members upstreamUnavailable": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("dirgate_upstream_duration counts = %v, want %v", counts, want)
	}
}

// newMetricReader installs a meter provider read by hand; breakers made afterwards
// report to it.
func newMetricReader(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	return r
}

func collect(t *testing.T, r *sdkmetric.ManualReader, name string) metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	return nil
}

// stateSeries returns the state gauge's points by their labels ("k=v,k=v").
func stateSeries(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	g, _ := collect(t, r, "dirgate_upstream_breaker_state").(metricdata.Gauge[int64])
	for _, p := range g.DataPoints {
		out[labels(p.Attributes)] = p.Value
	}
	return out
}

// durationCounts returns the duration histogram's counts by "operation outcome".
func durationCounts(t *testing.T, r *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	h, _ := collect(t, r, "dirgate_upstream_duration").(metricdata.Histogram[float64])
	for _, p := range h.DataPoints {
		op, _ := p.Attributes.Value("operation")
		outcome, _ := p.Attributes.Value("outcome")
		out[op.AsString()+" "+outcome.AsString()] += p.Count
	}
	return out
}

func labels(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

func waitServerHalfOpen(t *testing.T, b *Server) {
	t.Helper()
	for b.State() != StateHalfOpen {
		if b.State() == StateClosed {
			t.Fatal("breaker closed while waiting for half-open")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServerStateExposition: Prometheus (through the exporter cmd/dirgate uses)
// exposes the whole-directory and per-server series side by side in one family,
// although their label sets differ.
func TestServerStateExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)))
	New(&fakeDir{}, Settings{Name: "ldap", TelemetryOnly: true})
	a := NewServer(Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Hour}, dc1)
	b := NewServer(Settings{Name: "ldap"}, dc2)
	defer b.Close()
	_ = try(a, errUpstream)
	scrape := func() string {
		w := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
			ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			t.Fatalf("scrape: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	body := scrape()
	for _, line := range []string{
		`dirgate_upstream_breaker_state{upstream="ldap"} 0`,
		`dirgate_upstream_breaker_state{server="ldaps://dc1:636",upstream="ldap"} 2`,
		`dirgate_upstream_breaker_state{server="ldaps://dc2:636",upstream="ldap"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %s:\n%s", line, body)
		}
	}
	a.Close()
	if body := scrape(); strings.Contains(body, dc1) || !strings.Contains(body, dc2) {
		t.Errorf("after %s's Close:\n%s", dc1, body)
	}
}

// TestNotFoundCountsAsAnAnswer: a look-up of an unknown object is recorded with the
// outcome of one that found its object ("ok"), not one of its own: an object a
// caller may not view is found where an unknown one is not, both are answered the
// same 404, and /metrics must not tell them apart (docs/operations.md, "Metrics").
func TestNotFoundCountsAsAnAnswer(t *testing.T) {
	r := newMetricReader(t)
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	f := &fakeDir{}
	d := New(f, Settings{Name: "ldap", TelemetryOnly: true})
	if _, err := d.Lookup(context.Background(), testID, nil); err != nil {
		t.Fatal(err)
	}
	notFound := dirgate.Errorf(dirgate.ENOTFOUND, "The object was not found.")
	f.set(notFound)
	if _, err := d.Lookup(context.Background(), testID, nil); !errors.Is(err, notFound) {
		t.Fatalf("lookup of an unknown object: %v, want its error unchanged", err)
	}
	if got, want := durationCounts(t, r), map[string]uint64{"lookup ok": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dirgate_upstream_duration counts = %v, want %v", got, want)
	}
	// The trace, the operators' alone, still says which look-up found nothing.
	var got []string
	for _, s := range spans.Ended() {
		got = append(got, labels(attribute.NewSet(s.Attributes()...)))
	}
	if len(got) != 2 || strings.Contains(got[0], "dirgate.not_found") || !strings.Contains(got[1], "dirgate.not_found=true") ||
		!strings.Contains(got[1], "dirgate.outcome=ok") {
		t.Errorf("span attributes %q, want dirgate.not_found on the second look-up's only", got)
	}
}

// TestServerReset: Reset closes an open breaker at once and reports the change.
func TestServerReset(t *testing.T) {
	var changes []string
	b := NewServer(Settings{Name: "ldap", FailureThreshold: 1, OpenTimeout: time.Hour,
		OnServerStateChange: func(name, server string, from, to State) {
			changes = append(changes, fmt.Sprintf("%s %s %v->%v", name, server, from, to))
		}}, "ldaps://dc1:636")
	defer b.Close()
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("connection reset")))
	if !b.Open() {
		t.Fatal("one failure did not open a breaker of Failures 1")
	}
	b.Reset()
	if b.Open() || b.State() != StateClosed {
		t.Fatalf("state after Reset: %v", b.State())
	}
	if _, err := b.Allow(); err != nil {
		t.Errorf("Allow after Reset: %v", err)
	}
	if len(changes) != 2 || changes[1] != "ldap ldaps://dc1:636 open->closed" {
		t.Errorf("state changes %q", changes)
	}
	b.Reset() // closed already: nothing to report
	if len(changes) != 2 {
		t.Errorf("a Reset of a closed breaker reported %q", changes[2:])
	}
}
