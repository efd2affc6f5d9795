package opaconfig

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/open-policy-agent/opa/v1/logging"
)

// opaLogger hands OPA's plugin logs to dirgate's structured logger, so that bundle
// downloads, activations and decision-log uploads appear in dirgate's log, in its
// format. OPA's debug messages (one per poll) are kept at debug level.
type opaLogger struct {
	l     *slog.Logger
	level logging.Level
}

func newOPALogger(l *slog.Logger) *opaLogger {
	return &opaLogger{l: l.With("component", "opa"), level: logging.Info}
}

func (o *opaLogger) log(level logging.Level, sl slog.Level, format string, a []any) {
	if level > o.level {
		return
	}
	o.l.Log(context.Background(), sl, fmt.Sprintf(format, a...)) // OPA's logger carries no context
}

func (o *opaLogger) Debug(f string, a ...any) { o.log(logging.Debug, slog.LevelDebug, f, a) }
func (o *opaLogger) Info(f string, a ...any)  { o.log(logging.Info, slog.LevelInfo, f, a) }
func (o *opaLogger) Warn(f string, a ...any)  { o.log(logging.Warn, slog.LevelWarn, f, a) }
func (o *opaLogger) Error(f string, a ...any) { o.log(logging.Error, slog.LevelError, f, a) }

func (o *opaLogger) WithFields(fields map[string]any) logging.Logger {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, fields[k])
	}
	return &opaLogger{l: o.l.With(args...), level: o.level}
}

func (o *opaLogger) GetLevel() logging.Level  { return o.level }
func (o *opaLogger) SetLevel(l logging.Level) { o.level = l }
