package changefeed

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/cache"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// switchingSource answers from the DC at the head of its script until told to
// move on: as the LDAP upstream does, its position names the DC, and a batch from a
// new DC either resumes (no resync) or resyncs, as the script says (the marks the
// LDAP upstream keeps of other DCs play no part here).
type switchingSource struct {
	mu     sync.Mutex
	source string
	resync string // for the next read from a new source
	usn    uint64
}

func (s *switchingSource) ReadChanges(_ context.Context, pos dirgate.ChangePosition, _ int) (dirgate.ChangeBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usn++
	b := dirgate.ChangeBatch{Position: dirgate.ChangePosition{Source: s.source, USN: s.usn, Time: time.Now()}}
	switch {
	case pos.Source == "":
		b.Resync = dirgate.ResyncNoPosition
	case pos.Source != s.source:
		b.Resync, s.resync = s.resync, ""
	}
	return b, nil
}

func (s *switchingSource) moveTo(source, resync string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source, s.resync = source, resync
}

// serverSeries collects dirgate_changefeed_server: its value by server.
func serverSeries(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "dirgate_changefeed_server" {
				continue
			}
			for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				v, _ := p.Attributes.Value("server")
				out[v.AsString()] = p.Value
			}
		}
	}
	return out
}

// TestFeedReportsTheServerFollowed: dirgate_changefeed_server names the DC of the
// latest position, and only it; moving to another DC is logged with whether the
// feed resumed there or resynced.
func TestFeedReportsTheServerFollowed(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev); mp.Shutdown(context.Background()) })

	log, logged := logTo()
	in := newInstance(t, demo(t), cache.Config{Logger: log})
	const a, b, c = "CN=NTDS Settings,CN=DCA|inv-a", "CN=NTDS Settings,CN=DCB|inv-b", "CN=NTDS Settings,CN=DCC|inv-c"
	src := &switchingSource{source: a}
	startFeed(t, in, src, Config{})

	series := func() map[string]int64 { return serverSeries(t, r) }
	waitFor(t, "DCA reported", func() bool { s := series(); return len(s) == 1 && s["CN=NTDS Settings,CN=DCA"] == 1 })

	src.moveTo(b, "")
	waitFor(t, "DCB reported, alone", func() bool { s := series(); return len(s) == 1 && s["CN=NTDS Settings,CN=DCB"] == 1 })
	waitFor(t, "the move logged", func() bool { return strings.Contains(logged(), `msg="cache: change feed follows another DC"`) })
	if l := logged(); !strings.Contains(l, `from="CN=NTDS Settings,CN=DCA" to="CN=NTDS Settings,CN=DCB" resumed=true resync=""`) {
		t.Fatalf("log: %s", l)
	}

	src.moveTo(c, dirgate.ResyncServerChanged)
	waitFor(t, "DCC reported, alone", func() bool { s := series(); return len(s) == 1 && s["CN=NTDS Settings,CN=DCC"] == 1 })
	waitFor(t, "the resync logged", func() bool {
		return strings.Contains(logged(), `from="CN=NTDS Settings,CN=DCB" to="CN=NTDS Settings,CN=DCC" resumed=false resync=server_changed`)
	})
	if n := strings.Count(logged(), "follows another DC"); n != 2 {
		t.Fatalf("%d moves logged, want 2:\n%s", n, logged())
	}
}

func TestServerLabel(t *testing.T) {
	for in, want := range map[string]string{
		"CN=NTDS Settings,CN=DC1|0f0e":  "CN=NTDS Settings,CN=DC1",
		"no-invocation":                 "no-invocation",
		"":                              "",
		strings.Repeat("é", 200) + "|x": strings.Repeat("é", maxServerLabel/2),
		strings.Repeat("x", 255) + "é":  strings.Repeat("x", 255),
		"bad\xffutf8|x":                 "badutf8",
	} {
		if got := serverLabel(in); got != want {
			t.Errorf("serverLabel(%.20q) = %.20q, want %.20q", in, got, want)
		}
	}
}
