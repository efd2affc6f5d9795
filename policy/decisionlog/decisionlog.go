// Package decisionlog records the policy's decisions (docs/policy.md, "Decision
// log"): one JSON line per decision on a writer, and the same decision as a
// typed event for OPA's decision-log service (dirgate.DecisionSink), both masked
// alike. It implements policy.DecisionLog.
package decisionlog

import (
	"context"
	"errors"
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
	"github.com/dirgate/dirgate/policy"
)

// DefaultMaxDenied bounds the GUIDs of denied objects a listing's decision
// line names: a listing of 10,000 objects must not write a megabyte per request.
const DefaultMaxDenied = 100

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

// Config is the decision log's factory.
type Config struct {
	// Writer receives one JSON line per decision (Open opens the usual
	// destinations). nil writes no line.
	Writer io.Writer
	// Sink receives each decision as a typed event, masked as its line is: OPA's
	// decision-log service (package opaconfig). nil sends none.
	Sink dirgate.DecisionSink
	// Mask are JSON pointers (ParseMask) erased from every line and event, such as
	// /input/subject/dn.
	Mask []string
	// MaxDenied bounds the denied GUIDs named per listing line, and the GUIDs a
	// candidate's comparison names. nil means DefaultMaxDenied; 0 (or less) names
	// none.
	MaxDenied *int
	// Now is the clock of the lines' time. nil means time.Now.
	Now func() time.Time
	// Logger receives the log's own failures. nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	for _, m := range c.Mask {
		if _, err := ParseMask(m); err != nil {
			errs = append(errs, fmt.Errorf("decision log mask: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Log writes one JSON line per decision, and hands each to the sink. It never
// sees a token: the Authorizer only ever receives the resolved principal.
type Log struct {
	mu        sync.Mutex
	w         io.Writer
	sink      dirgate.DecisionSink
	masks     lineMasks
	maxDenied int
	now       func() time.Time
	logger    *slog.Logger
	failed    bool // a write failed; logged once until a write succeeds
}

var _ policy.DecisionLog = (*Log)(nil)

// New returns the decision log cfg describes.
func New(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var masks []Mask
	for _, s := range cfg.Mask {
		m, _ := ParseMask(s) // validated above
		masks = append(masks, m)
	}
	d := &Log{w: cfg.Writer, sink: cfg.Sink, masks: newLineMasks(masks), maxDenied: DefaultMaxDenied, now: cfg.Now, logger: cfg.Logger}
	if n := cfg.MaxDenied; n != nil {
		d.maxDenied = max(*n, -1) // -1: the lines name none
		if *n == 0 {
			d.maxDenied = -1
		}
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.logger == nil {
		d.logger = slog.Default()
	}
	return d, nil
}

// MaxNamed is the bound of the GUIDs a line names per list.
func (d *Log) MaxNamed() int { return d.maxDenied }

// Listing logs the decisions of one listing.
func (d *Log) Listing(ctx context.Context, ld policy.ListingDecision) {
	d.write(ctx, &line{span: trace.SpanContextFromContext(ctx), listing: ld, isListing: true, maxDenied: d.maxDenied})
}

// Change logs the decision on one object (a removal, an addition, a view, an
// explain, a sign-in).
func (d *Log) Change(ctx context.Context, cd policy.ChangeDecision) {
	d.write(ctx, &line{span: trace.SpanContextFromContext(ctx), change: cd})
}

// lineBuffers keeps encoded lines' buffers for the next lines.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledLine bounds the buffers kept: a rare huge line is not held forever.
const maxPooledLine = 64 << 10

// write stamps l with the time and a decision id, encodes it and writes it, one
// Write per line so that concurrent lines never interleave, and hands its event
// to the sink.
func (d *Log) write(ctx context.Context, l *line) {
	if d.w == nil && d.sink == nil {
		return
	}
	l.time = d.now()
	id, err := uuid.NewRandom()
	if err != nil {
		d.logger.Error("decision log: decision id", "err", err)
		return
	}
	l.id = id
	if d.sink != nil {
		d.sink.LogDecision(ctx, pend(l, &d.masks))
	}
	if d.w == nil {
		return
	}
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

// Open opens a decision log destination: "" or "off" for none, "stdout",
// "stderr", or a file path (appended to, created with mode 0600). close releases
// the file; it is a no-op for the standard streams.
func Open(dest string, stdout, stderr io.Writer) (w io.Writer, close func() error, err error) {
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
