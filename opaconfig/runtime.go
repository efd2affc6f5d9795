// Package opaconfig takes dirgate's policy from OPA bundles and sends its
// decisions to OPA's decision-log service, as an OPA configuration file (the file
// `opa run --config-file` takes) describes them. It runs OPA's own plugin
// manager, bundle plugin (download with ETags and polling, signature
// verification, persistence) and decision-log plugin (batching, gzip upload,
// retry with backoff, bounded buffer, mask_decision); what it adds is the hand-
// over: each activated bundle is delivered to the policy as a policy directory
// would be (Policy), and each decision line becomes an OPA decision event.
// docs/policy.md, "Policy from a bundle service", is its reference.
package opaconfig

import (
	"context"
	"errors"
	"fmt"
	"github.com/dirgate/dirgate"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/plugins/status"
)

// DefaultStartWait is Config.StartWait's default.
const DefaultStartWait = time.Minute

// candidateWait bounds the wait at Open for the candidate bundle, which does not
// hold the gateway back: one that has not arrived by then is reported (Ready) and
// compared once it arrives.
const candidateWait = 10 * time.Second

// Config is the Runtime's factory.
type Config struct {
	// File is the OPA configuration file (YAML or JSON).
	File string
	// Candidate names the bundle of the file that is the candidate policy (in
	// shadow) rather than part of the active one. Empty: none.
	Candidate string
	// ID is the instance's id in OPA's status reports and decision events (its
	// labels.id). Empty: a random one.
	ID string
	// Logger receives OPA's plugin logs. nil means slog.Default().
	Logger *slog.Logger
	// StartWait bounds the wait at Open for every bundle's first activation, from
	// its service or from disk (persist): dirgate does not start without a policy.
	// 0 means DefaultStartWait.
	StartWait time.Duration
	// DecisionQueue bounds the decision lines waiting to become OPA events (OPA's
	// buffer, buffer_size_limit_*, bounds those waiting to be uploaded). 0 means
	// DefaultDecisionQueue.
	DecisionQueue int
	// Trust accepts unsigned bundles or plain HTTP services, each refused at Open
	// by default.
	Trust Trust
	// MaxBundleBytes bounds each bundle download, compressed and decompressed, and
	// each file of a bundle without size_limit_bytes. 0 means
	// DefaultMaxBundleBytes.
	MaxBundleBytes int64
}

// Runtime is the OPA configuration at work: the active policy's bundles, the
// candidate's, and the decision-log plugin.
type Runtime struct {
	cfg       Config
	file      *file
	active    *feed
	candidate *feed
	logs      *logs.Plugin
	// console: decision_logs.console, dirgate's own line on stdout.
	console bool
	// logMetrics are the decision-log plugin's counters (drops among them).
	logMetrics metrics.Metrics
	decisions  *decisionWriter
	cancel     context.CancelFunc
}

// Open reads the configuration file, starts OPA's plugins and waits for the
// bundles' first activation. Keys of the file dirgate does not act on are logged.
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartWait == 0 {
		cfg.StartWait = DefaultStartWait
	}
	if cfg.ID == "" {
		cfg.ID = uuid.NewString()
	}
	if cfg.MaxBundleBytes <= 0 {
		cfg.MaxBundleBytes = DefaultMaxBundleBytes
	}
	f, err := readFile(cfg.File)
	if err != nil {
		return nil, err
	}
	warnings, err := f.checkTrust(cfg.Trust)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		cfg.Logger.Warn("opa config: INSECURE: "+w, "file", cfg.File)
	}
	if len(f.ignored) > 0 {
		cfg.Logger.Warn("opa config: keys dirgate does not act on are ignored", "file", cfg.File, "keys", f.ignored)
	}
	active := f.bundles
	if cfg.Candidate != "" {
		if !slices.Contains(f.bundles, cfg.Candidate) {
			return nil, fmt.Errorf("opa config: the candidate bundle %q is not in %s", cfg.Candidate, cfg.File)
		}
		active = slices.DeleteFunc(slices.Clone(active), func(n string) bool { return n == cfg.Candidate })
		if len(active) == 0 {
			return nil, fmt.Errorf("opa config: the candidate bundle %q is the only bundle; the active policy needs one", cfg.Candidate)
		}
	}
	r := &Runtime{cfg: cfg, file: f, logMetrics: metrics.New()}
	_, upload, console := f.decisionLogs()
	r.console = console
	raw, err := f.managerConfig(active, true, cfg.MaxBundleBytes)
	if err != nil {
		return nil, fmt.Errorf("opa config: %w", err)
	}
	r.active, err = openFeed(ctx, "policy", raw, f.services(), cfg.MaxBundleBytes, cfg.ID, cfg.Logger, cfg.StartWait, true, func(m *plugins.Manager) error {
		trigger := plugins.DefaultTriggerMode
		if upload {
			lcfg, err := logs.NewConfigBuilder().WithBytes(m.Config.DecisionLogs).WithServices(m.Services()).
				WithPlugins(m.Plugins()).WithTriggerMode(&trigger).WithLogger(m.Logger()).Parse()
			if err != nil {
				return fmt.Errorf("opa config: decision_logs: %w", err)
			}
			r.logs = logs.New(lcfg, m).WithMetrics(r.logMetrics)
			m.Register(logs.Name, r.logs)
		}
		if m.Config.Status != nil {
			scfg, err := status.NewConfigBuilder().WithBytes(m.Config.Status).WithServices(m.Services()).
				WithPlugins(m.Plugins()).WithTriggerMode(&trigger).Parse()
			if err != nil {
				return fmt.Errorf("opa config: status: %w", err)
			}
			if scfg != nil {
				sp := status.New(scfg, m)
				m.Register(status.Name, sp)
				// As opa run wires them: the bundles' state goes into the reports.
				bundle.Lookup(m).RegisterBulkListener(status.Name, sp.BulkUpdateBundleStatus)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cfg.Candidate != "" {
		raw, err := f.managerConfig([]string{cfg.Candidate}, false, cfg.MaxBundleBytes)
		if err != nil {
			r.active.stop(ctx)
			return nil, fmt.Errorf("opa config: %w", err)
		}
		// The candidate starts with whatever arrived by candidateWait (maybe
		// nothing, which the policy reports as a candidate that does not load),
		// and follows the service from there.
		r.candidate, err = openFeed(ctx, "candidate", raw, f.services(), cfg.MaxBundleBytes, cfg.ID, cfg.Logger, min(cfg.StartWait, candidateWait), false, nil)
		if err != nil {
			r.active.stop(ctx)
			return nil, err
		}
	}
	if r.logs != nil {
		r.decisions = newDecisionWriter(r.logs, r.active.bundleInfo, cfg.DecisionQueue, cfg.Logger)
	}
	return r, nil
}

// Source names the active policy's bundles, for the policy's status.
func (r *Runtime) Source() string { return bundlesSource(r.cfg.File, r.activeNames()) }

// CandidateSource names the candidate bundle ("" without one).
func (r *Runtime) CandidateSource() string {
	if r.candidate == nil {
		return ""
	}
	return bundlesSource(r.cfg.File, []string{r.cfg.Candidate})
}

func (r *Runtime) activeNames() []string {
	return slices.DeleteFunc(slices.Clone(r.file.bundles), func(n string) bool { return n == r.cfg.Candidate })
}

func bundlesSource(file string, names []string) string {
	return fmt.Sprintf("bundles %v of %s", names, file)
}

// Files returns the active policy as the bundles delivered it at Open.
func (r *Runtime) Files() fs.FS { return r.active.current.files }

// CandidateFiles returns the candidate policy as delivered at Open (nil without).
func (r *Runtime) CandidateFiles() fs.FS {
	if r.candidate == nil {
		return nil
	}
	return r.candidate.current.files
}

// Console tells whether decision_logs.console asks for dirgate's decision lines
// on stdout.
func (r *Runtime) Console() bool { return r.console }

// DecisionSink returns the sink that sends each decision as an OPA decision
// event (nil when the file sends decisions to no service). It never blocks: a
// decision that finds its queue full is dropped and counted.
func (r *Runtime) DecisionSink() dirgate.DecisionSink {
	if r.decisions == nil {
		return nil
	}
	return r.decisions
}

// Attach starts delivering new bundles to the policy and the candidate (nil
// without one) until Close.
func (r *Runtime) Attach(ctx context.Context, active, candidate Policy) error {
	if r.cancel != nil {
		return errors.New("opa config: already attached")
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.active.attach(ctx, active)
	if r.candidate != nil && candidate != nil {
		r.candidate.attach(ctx, candidate)
	}
	if r.decisions != nil {
		r.decisions.start(ctx)
	}
	return nil
}

// Dropped counts the decisions that were not sent: those that found dirgate's
// queue full, and those OPA's buffer dropped (buffer_size_limit_*, rate limit).
func (r *Runtime) Dropped() map[string]int64 {
	out := map[string]int64{}
	if r.decisions == nil {
		return out
	}
	out["queue_full"] = r.decisions.dropped.Load()
	for reason, name := range map[string]string{
		"buffer_full":    "decision_logs_dropped_buffer_size_limit_exceeded",
		"buffer_bytes":   "decision_logs_dropped_buffer_size_limit_bytes_exceeded",
		"rate_limit":     "decision_logs_dropped_rate_limit_exceeded",
		"encoding_error": "decision_logs_encoding_failure",
	} {
		if v, ok := r.logMetrics.Counter(name).Value().(uint64); ok {
			out[reason] = int64(v)
		}
	}
	return out
}

// Close stops delivering, sends the decisions still queued (within ctx's
// deadline, as OPA's plugin flushes on stop) and stops the plugins.
func (r *Runtime) Close(ctx context.Context) error {
	if r.decisions != nil {
		r.decisions.close(ctx)
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.candidate != nil {
		r.candidate.stop(ctx)
	}
	r.active.stop(ctx)
	return nil
}
