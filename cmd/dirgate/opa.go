package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dirgate/dirgate/opaconfig"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/candidate"
	"github.com/dirgate/dirgate/policy/decisionlog"
)

// opaCloseWait bounds the sending of the decisions still buffered at shutdown.
const opaCloseWait = 5 * time.Second

// openBundles starts OPA's plugins when DIRGATE_OPA_CONFIG_FILE is set: the policy
// (and the candidate named by DIRGATE_POLICY_CANDIDATE_BUNDLE) come from its
// bundles, and the decisions also go to its decision-log service, and their lines
// to stdout when decision_logs.console asks for it. Without the file it does
// nothing and returns nil.
func (m *Main) openBundles(ctx context.Context, pcfg *policy.Config, ccfg *candidate.Config, dcfg *decisionlog.Config) (*opaconfig.Runtime, error) {
	if m.Config.OPAConfigFile == "" {
		return nil, nil
	}
	rt, err := opaconfig.Open(ctx, opaconfig.Config{File: m.Config.OPAConfigFile,
		Candidate: m.Config.PolicyCandidateBundle, Logger: m.Logger, MaxBundleBytes: m.Config.OPABundleMaxBytes,
		Trust: opaconfig.Trust{Unsigned: m.Config.OPAAllowUnsigned, PlainHTTP: m.Config.OPAAllowPlainHTTP}})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	// Closed after the policy (closers run last first): the decisions it logs
	// until then are sent.
	m.closers = append(m.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), opaCloseWait)
		defer cancel()
		return rt.Close(ctx)
	})
	pcfg.Files, pcfg.Source = rt.Files(), rt.Source()
	if m.Config.PolicyCandidateBundle != "" {
		ccfg.Files, ccfg.Source = rt.CandidateFiles(), rt.CandidateSource()
	}
	if s := rt.DecisionSink(); s != nil {
		dcfg.Sink = s
	}
	if rt.Console() && m.Config.DecisionLog != "stdout" {
		lw := m.lines(m.stdout)
		m.closers = append(m.closers, lw.Close)
		if dcfg.Writer != nil {
			dcfg.Writer = io.MultiWriter(dcfg.Writer, lw)
		} else {
			dcfg.Writer = lw
		}
	}
	reg, err := observeDropped(rt)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	m.closers = append(m.closers, reg.Unregister)
	return rt, nil
}

// observeDropped reports dirgate_decision_log_dropped: the decisions that were
// not sent to the decision-log service, by reason.
func observeDropped(rt *opaconfig.Runtime) (metric.Registration, error) {
	meter := otel.Meter("github.com/dirgate/dirgate/opaconfig")
	c, err := meter.Int64ObservableCounter("dirgate_decision_log_dropped",
		metric.WithDescription("Decisions not sent to the OPA decision-log service, by reason: queue_full (dirgate's queue to OPA's plugin), buffer_full and buffer_bytes (OPA's buffer_size_limit_events / _bytes), rate_limit (max_decisions_per_second), encoding_error."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for reason, n := range rt.Dropped() {
			o.ObserveInt64(c, n, metric.WithAttributes(attribute.String("reason", reason)))
		}
		return nil
	}, c)
}
