package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/dirgate/dirgate"
)

// DefaultMaxDeniedLogged bounds the GUIDs of denied objects a listing's decision
// line names: a listing of 10,000 objects must not write a megabyte per request.
const DefaultMaxDeniedLogged = 100

// Mask is a JSON pointer (RFC 6901) into a decision log line, such as
// /input/subject/dn: the member it names is erased from every line, as OPA's
// decision log masking erases input fields.
type Mask struct {
	raw    string
	tokens []string
}

// MaxMaskLength bounds a mask pointer; masks come from configuration.
const MaxMaskLength = 256

// ParseMask parses a JSON pointer naming an object member of a decision line.
func ParseMask(s string) (Mask, error) {
	if len(s) > MaxMaskLength {
		return Mask{}, fmt.Errorf("parse mask: longer than %d bytes", MaxMaskLength)
	}
	if !strings.HasPrefix(s, "/") || len(s) < 2 {
		return Mask{}, fmt.Errorf("parse mask %q: a JSON pointer starts with / and names a member", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		// RFC 6901: "~" is written "~0" and "/" is written "~1"; any other "~" is an error.
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1')) {
				return Mask{}, fmt.Errorf("parse mask %q: ~ must be followed by 0 or 1", s)
			}
		}
		if p == "" {
			return Mask{}, fmt.Errorf("parse mask %q: empty member name", s)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return Mask{raw: s, tokens: parts}, nil
}

func (m Mask) String() string { return m.raw }

// erase removes the member m names from doc; it reports whether there was one.
func (m Mask) erase(doc map[string]any) bool {
	cur := doc
	for _, t := range m.tokens[:len(m.tokens)-1] {
		next, ok := cur[t].(map[string]any)
		if !ok {
			return false
		}
		cur = next
	}
	last := m.tokens[len(m.tokens)-1]
	if _, ok := cur[last]; !ok {
		return false
	}
	delete(cur, last)
	return true
}

// decisionLog writes one JSON line per decision. It never sees a token: the
// Authorizer only ever receives the resolved principal.
type decisionLog struct {
	mu        sync.Mutex
	w         io.Writer
	masks     []Mask
	maxDenied int
	now       func() time.Time
	logger    *slog.Logger
	failed    bool // a write failed; logged once until a write succeeds
}

// listingDecision is what FilterView decided for one listing.
type listingDecision struct {
	revision string
	in       Input
	objs     []dirgate.Object
	allowed  []bool
	stats    filterStats
	elapsed  time.Duration
	// candidate is what the candidate policy decided differently (nil: not evaluated).
	candidate *candidateDiff
}

func (d *decisionLog) listing(ctx context.Context, ld listingDecision) {
	if d == nil || d.w == nil {
		return
	}
	nAllowed := 0
	var denied []string // not []any: boxing each GUID was an allocation per denied object
	truncated := false
	decided := ld.stats.decided
	for i, ok := range ld.allowed[:decided] {
		switch {
		case ok:
			nAllowed++
		case len(denied) < d.maxDenied:
			denied = append(denied, ld.objs[i].GUID)
		default:
			truncated = true
		}
	}
	if denied == nil {
		denied = []string{}
	}
	result := map[string]any{
		"allowed":         nAllowed,
		"denied":          decided - nAllowed,
		"deniedGuids":     denied,
		"deniedTruncated": truncated,
	}
	if ld.stats.errors > 0 {
		result["errors"] = ld.stats.errors
	}
	if u := len(ld.allowed) - decided; u > 0 {
		// The size limit was reached before them: they were not decided, and are not shown.
		result["undecided"] = u
	}
	ev := d.event(ctx, ld.revision, ld.in, result, ld.elapsed)
	ev["engine"] = map[string]any{"mode": ld.stats.mode, "cachedPlan": ld.stats.cached, "reusedDecisions": ld.stats.reused}
	ld.candidate.addTo(ev, d.maxDenied)
	d.write(ev)
}

// change logs the decision on one membership change (a removal or an addition).
func (d *decisionLog) change(ctx context.Context, revision string, in Input, allowed bool, evalErr error, elapsed time.Duration, cand *candidateDiff) {
	if d == nil || d.w == nil {
		return
	}
	result := map[string]any{"allowed": allowed}
	if evalErr != nil {
		result["error"] = "evaluation failed" // detail goes to the application log
	}
	ev := d.event(ctx, revision, in, result, elapsed)
	cand.addTo(ev, d.maxDenied)
	d.write(ev)
}

// event builds the fields every decision line has, as maps so that masks can erase
// any member.
func (d *decisionLog) event(ctx context.Context, revision string, in Input, result map[string]any, elapsed time.Duration) map[string]any {
	input := map[string]any{
		"action": in.Action,
		"subject": map[string]any{
			"dn": in.Subject.DN, "guid": in.Subject.GUID, "sid": in.Subject.SID,
			"displayName": in.Subject.DisplayName, "groupCount": len(in.Subject.Groups),
		},
		"group": map[string]any{"dn": in.Group.DN, "guid": in.Group.GUID},
		"request": map[string]any{
			"includeIndirect": in.Request.IncludeIndirect,
			"properties":      in.Request.Properties,
			"sizeLimit":       in.Request.SizeLimit,
		},
	}
	if in.Object != nil {
		input["object"] = map[string]any{"dn": in.Object.DN, "guid": in.Object.GUID, "objectType": in.Object.ObjectType}
	}
	ev := map[string]any{
		"time":        d.now().UTC().Format(time.RFC3339Nano),
		"decision_id": uuid.NewString(),
		"path":        strings.ReplaceAll(strings.TrimPrefix(decisionPath, "data."), ".", "/"),
		"revision":    revision,
		"input":       input,
		"result":      result,
		"duration_ms": float64(elapsed.Microseconds()) / 1000,
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		ev["trace_id"] = sc.TraceID().String()
		ev["span_id"] = sc.SpanID().String()
	}
	var erased []string
	for _, m := range d.masks {
		if m.erase(ev) {
			erased = append(erased, m.raw)
		}
	}
	if erased != nil {
		ev["erased"] = erased
	}
	return ev
}

func (d *decisionLog) write(ev map[string]any) {
	b, err := json.Marshal(ev)
	if err != nil {
		d.logger.Error("decision log: encode", "err", err)
		return
	}
	b = append(b, '\n')
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.w.Write(b); err != nil {
		if !d.failed {
			d.logger.Error("decision log: write failed; decisions are not being logged", "err", err)
		}
		d.failed = true
		return
	}
	if d.failed {
		d.logger.Info("decision log: writing again")
	}
	d.failed = false
}

// OpenDecisionLog opens a decision log destination: "" or "off" for none, "stdout",
// "stderr", or a file path (appended to, created with mode 0600). close releases
// the file; it is a no-op for the standard streams.
func OpenDecisionLog(dest string, stdout, stderr io.Writer) (w io.Writer, close func() error, err error) {
	noop := func() error { return nil }
	switch dest {
	case "", "off":
		return nil, noop, nil
	case "stdout":
		return stdout, noop, nil
	case "stderr":
		return stderr, noop, nil
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, noop, fmt.Errorf("open decision log: %w", err)
	}
	return f, f.Close, nil
}
