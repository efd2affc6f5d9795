package policy

import (
	"context"
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

// decisionLogPath is the decision's path as lines name it, OPA's way.
var decisionLogPath = strings.ReplaceAll(strings.TrimPrefix(decisionPath, "data."), ".", "/")

// decisionLog writes one JSON line per decision. It never sees a token: the
// Authorizer only ever receives the resolved principal.
type decisionLog struct {
	mu        sync.Mutex
	w         io.Writer
	masks     lineMasks
	maxDenied int
	now       func() time.Time
	logger    *slog.Logger
	failed    bool // a write failed; logged once until a write succeeds
}

func newDecisionLog(w io.Writer, masks []Mask, maxDenied int, now func() time.Time, logger *slog.Logger) *decisionLog {
	if maxDenied == 0 {
		maxDenied = DefaultMaxDeniedLogged
	}
	return &decisionLog{w: w, masks: newLineMasks(masks), maxDenied: maxDenied, now: now, logger: logger}
}

// listingDecision is what FilterView decided for one listing.
type listingDecision struct {
	revision string
	in       Input
	objs     []dirgate.Object
	allowed  []bool
	nAllowed int
	stats    filterStats
	elapsed  time.Duration
	// candidate is what the candidate policy decided differently (nil: not evaluated).
	candidate *candidateDiff
	// withheld is what the property rule left out (nil: no property was at stake).
	withheld *withheld
}

func (d *decisionLog) listing(ctx context.Context, ld listingDecision) {
	if d == nil || d.w == nil {
		return
	}
	d.write(&line{revision: ld.revision, in: ld.in, elapsed: ld.elapsed, span: trace.SpanContextFromContext(ctx),
		listing: &listingResult{objs: ld.objs, allowed: ld.allowed, nAllowed: ld.nAllowed, maxDenied: d.maxDenied, stats: ld.stats}, candidate: ld.candidate, withheld: ld.withheld})
}

// change logs the decision on one membership change (a removal or an addition).
func (d *decisionLog) change(ctx context.Context, revision string, in Input, allowed bool, evalErr error, elapsed time.Duration, cand *candidateDiff) {
	if d == nil || d.w == nil {
		return
	}
	d.write(&line{revision: revision, in: in, elapsed: elapsed, span: trace.SpanContextFromContext(ctx),
		change: &changeResult{allowed: allowed, failed: evalErr != nil}, candidate: cand})
}

// lineBuffers keeps encoded lines' buffers for the next lines.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledLine bounds the buffers kept: a rare huge line is not held forever.
const maxPooledLine = 64 << 10

// write stamps l with the time and a decision id, encodes it and writes it, one
// Write per line so that concurrent lines never interleave.
func (d *decisionLog) write(l *line) {
	l.time = d.now()
	id, err := uuid.NewRandom()
	if err != nil {
		d.logger.Error("decision log: decision id", "err", err)
		return
	}
	l.id = id
	bp := lineBuffers.Get().(*[]byte)
	b := append(appendLine((*bp)[:0], l, &d.masks), '\n')
	defer func() {
		if cap(b) <= maxPooledLine {
			*bp = b[:0]
			lineBuffers.Put(bp)
		}
	}()
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
