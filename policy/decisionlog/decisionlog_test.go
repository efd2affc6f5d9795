package decisionlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/decisionlog"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestParseMask(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		// The usual form.
		{name: "member", in: "/input/subject/dn"},
		// RFC 6901 escapes: ~1 is "/", ~0 is "~".
		{name: "escapes", in: "/input/a~1b/c~0d"},
		// Not a pointer: must start with "/".
		{name: "relative", in: "input/subject", wantErr: true},
		// The whole document cannot be erased.
		{name: "root", in: "/", wantErr: true},
		// An empty member name is a typo.
		{name: "empty member", in: "/input//dn", wantErr: true},
		// A "~" that is not an escape.
		{name: "bad escape", in: "/input/a~2", wantErr: true},
		{name: "trailing tilde", in: "/input/a~", wantErr: true},
		// Masks come from configuration, but are still bounded.
		{name: "too long", in: "/" + strings.Repeat("a", decisionlog.MaxMaskLength), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decisionlog.ParseMask(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseMask(%q) = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && m.String() != tt.in {
				t.Errorf("String() = %q", m.String())
			}
		})
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"/input/subject/dn", "/a~0~1", "/", "", "a/b", "/x~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := decisionlog.ParseMask(s)
		if err != nil {
			return
		}
		if m.String() != s || !strings.HasPrefix(s, "/") || len(s) > decisionlog.MaxMaskLength {
			t.Fatalf("accepted %q as %q", s, m.String())
		}
	})
}

type logLine struct {
	DecisionID string         `json:"decision_id"`
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	Revision   string         `json:"revision"`
	Path       string         `json:"path"`
	Time       time.Time      `json:"time"`
	Input      map[string]any `json:"input"`
	Result     struct {
		Allowed         any      `json:"allowed"`
		Denied          int      `json:"denied"`
		DeniedGUIDs     []string `json:"deniedGuids"`
		DeniedTruncated bool     `json:"deniedTruncated"`
	} `json:"result"`
	Erased []string `json:"erased"`
}

func parseLines(t *testing.T, b []byte) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var line logLine
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("decision line %q: %v", l, err)
		}
		out = append(out, line)
	}
	return out
}

// TestDecisionLog: one line per listing and per removal, with the fields the
// contract names, masks applied, denied GUIDs bounded, and the trace id of the
// request when there is one.
func TestDecisionLog(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &buf, MaxDenied: new(2), Now: func() time.Time { return now },
		Mask: []string{"/input/subject/dn", "/input/request/properties", "/input/not/there"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.Open(context.Background(), policy.Config{Logger: quietLogger(), DecisionLog: dlog})
	if err != nil {
		t.Fatal(err)
	}
	caller := dirgate.Principal{DN: "CN=Nobody,DC=x", GUID: "g-1", SID: "S-1-5-1", DomainName: "x", Groups: []dirgate.GroupRef{{DN: "CN=G,DC=x"}}}
	group := dirgate.Object{GUID: "grp", DN: "CN=Group,DC=x", ObjectType: dirgate.TypeGroup}
	var objs []dirgate.Object
	for i := range 5 {
		objs = append(objs, dirgate.Object{GUID: fmt.Sprintf("o%d", i), DN: fmt.Sprintf("CN=o%d,DC=x", i), ObjectType: dirgate.TypeUser})
	}
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID}))

	if _, err := a.FilterView(ctx, caller, group, dirgate.ListOptions{Properties: []string{"mail"}}, objs); err != nil {
		t.Fatal(err)
	}
	if err := a.AllowRemove(context.Background(), caller, group, objs[0]); dirgate.ErrorCode(err) != dirgate.EFORBIDDEN {
		t.Fatalf("AllowRemove = %v, want EFORBIDDEN", err)
	}
	lines := parseLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("%d decision lines, want 2:\n%s", len(lines), buf.String())
	}
	list, rm := lines[0], lines[1]
	if list.DecisionID == "" || list.DecisionID == rm.DecisionID {
		t.Errorf("decision ids %q and %q: want distinct ids", list.DecisionID, rm.DecisionID)
	}
	if list.TraceID != traceID.String() || list.SpanID != spanID.String() || rm.TraceID != "" {
		t.Errorf("trace ids: listing %q/%q, removal %q", list.TraceID, list.SpanID, rm.TraceID)
	}
	if list.Revision != a.Revision() || list.Path != "dirgate/authz/allow" || !list.Time.Equal(now) {
		t.Errorf("listing line revision %q path %q time %v", list.Revision, list.Path, list.Time)
	}
	if list.Input["action"] != "view" || rm.Input["action"] != "remove" {
		t.Errorf("actions %v and %v", list.Input["action"], rm.Input["action"])
	}
	subject := list.Input["subject"].(map[string]any)
	if _, ok := subject["dn"]; ok || subject["guid"] != "g-1" || subject["domainName"] != "x" {
		t.Errorf("subject %v: want the dn masked and the guid and domain name kept", subject)
	}
	if _, ok := list.Input["request"].(map[string]any)["properties"]; ok {
		t.Errorf("request %v: properties not masked", list.Input["request"])
	}
	if strings.Join(list.Erased, " ") != "/input/subject/dn /input/request/properties" {
		t.Errorf("erased %q: want the masks that erased something", list.Erased)
	}
	if list.Result.Allowed != float64(0) || list.Result.Denied != 5 || len(list.Result.DeniedGUIDs) != 2 || !list.Result.DeniedTruncated {
		t.Errorf("listing result %+v: want 0 allowed, 5 denied, 2 GUIDs named and truncation flagged", list.Result)
	}
	if rm.Result.Allowed != false || rm.Input["object"].(map[string]any)["guid"] != "o0" {
		t.Errorf("removal line %+v", rm)
	}
}

// TestMaxDeniedSetting: no MaxDenied names DefaultMaxDenied GUIDs, 0 names none (the
// setting's 0), and any other count that many.
func TestMaxDeniedSetting(t *testing.T) {
	for _, tc := range []struct {
		set  *int
		want int
	}{{nil, decisionlog.DefaultMaxDenied}, {new(0), -1}, {new(5), 5}} {
		l, err := decisionlog.New(decisionlog.Config{Writer: io.Discard, MaxDenied: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.MaxNamed(); got != tc.want {
			t.Errorf("MaxDenied %v: MaxNamed %d, want %d", tc.set, got, tc.want)
		}
	}
}
