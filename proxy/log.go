package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/telemetry"
)

// Bounds on what the request log takes from a request or from an error, so that a
// client cannot make a log line arbitrarily long. slog's handlers quote strings, so
// control characters cannot forge lines.
const (
	maxLoggedMethod     = 16
	maxLoggedIdentifier = 256
	maxLoggedAddr       = 64
	maxLoggedError      = 1024
)

// record gathers, while a request is served, what its one log line reports. It travels
// in the request's context so that Error can fill it in.
type record struct {
	route   string
	quiet   bool   // a mount (health, metrics): logged at debug level
	client  string // Config.ClientAddr, bounded: the throttle's key
	subject string
	group   string
	member  string
	code    string // dirgate code of an error response
	cache   string // how a listing was served (dirgate.CacheStatus), for metrics
	err     error  // detail of a 5xx or of a cancellation: for the log only
	aborted bool   // the client went away; nothing was written
}

type recordKey struct{}

func recordFrom(ctx context.Context) *record {
	r, _ := ctx.Value(recordKey{}).(*record)
	return r
}

// fail notes an error response; err is kept only when its detail belongs in the log.
func (r *record) fail(code string, err error) {
	if r != nil {
		r.code, r.err = code, err
	}
}

func (r *record) abort(err error) {
	if r != nil {
		r.code, r.err, r.aborted = dirgate.ECANCELED, err, true
	}
}

// logRequest writes the request's one line: method, route name (never the raw path),
// status, duration, bytes, client, caller, and the identifiers acted on. The token
// and raw query are never logged.
func (s *server) logRequest(r *http.Request, rec *record, sw *telemetry.StatusWriter, start time.Time, panicked any) {
	status := sw.Status
	switch {
	case rec.aborted || panicked == http.ErrAbortHandler:
		status = StatusClientClosedRequest
	case panicked != nil:
		status = http.StatusInternalServerError
	case status == 0:
		status = http.StatusOK // what net/http sends when nothing was written
	}
	level := slog.LevelInfo
	switch {
	case status >= 500 && status != StatusClientClosedRequest:
		level = slog.LevelError
	case rec.quiet:
		level = slog.LevelDebug
	}
	elapsed := s.cfg.Now().Sub(start)
	if !rec.quiet {
		s.metrics.record(r.Context(), rec.route, r.Method, status, rec.cache, elapsed.Seconds())
	}
	attrs := []slog.Attr{
		slog.String("method", clip(r.Method, maxLoggedMethod)),
		slog.String("route", rec.route),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		slog.Int64("bytes", sw.Bytes),
		slog.String("client", rec.client),
	}
	if rec.subject != "" {
		attrs = append(attrs, slog.String("subject", clip(rec.subject, maxLoggedIdentifier)))
	}
	if rec.group != "" {
		attrs = append(attrs, slog.String("group", clip(rec.group, maxLoggedIdentifier)))
	}
	if rec.member != "" {
		attrs = append(attrs, slog.String("member", clip(rec.member, maxLoggedIdentifier)))
	}
	if rec.code != "" {
		attrs = append(attrs, slog.String("code", rec.code))
	}
	if rec.err != nil {
		attrs = append(attrs, slog.String("error", clip(rec.err.Error(), maxLoggedError)))
	}
	if panicked != nil && panicked != http.ErrAbortHandler {
		attrs = append(attrs, slog.Bool("panic", true))
	}
	s.cfg.Logger.LogAttrs(r.Context(), level, "http request", attrs...)
}

// clip bounds s to n bytes, marking a cut with "...". It may cut a UTF-8 sequence;
// the log handler then escapes the broken bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
