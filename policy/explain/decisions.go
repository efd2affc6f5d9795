// Package explain answers the decisions API (docs/policy.md, "The decisions
// API"): for one principal, every decision of the active policy and of the
// candidate or a draft on a group's unfiltered listing, with the reasons the
// policy gives, after the policy has allowed the caller to explain that
// principal in that group. proxy serves it over HTTP (proxy.Decisions); package
// policy decides, `dirgate policy diff` compares (Explainer.Compare).
package explain

import (
	"context"
	"errors"
	"fmt"

	"log/slog"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
)

// Directory is what the decisions API reads of the directory
// (dirgate.MemberService): the group, the explored principal, and the group's
// unfiltered listing.
type Directory interface {
	Group(ctx context.Context, groupID dirgate.Identifier) (dirgate.Object, error)
	Principal(ctx context.Context, id dirgate.Identifier) (dirgate.Principal, error)
	UnfilteredOf(ctx context.Context, group dirgate.Object, opts dirgate.ListOptions) ([]dirgate.Object, error)
}

// Policy is what the decisions API asks of the policy (policy.Authorizer): may
// the caller explain the subject, and everything an Explainer asks.
type Policy interface {
	Engine
	AllowExplainNamed(ctx context.Context, caller, subject dirgate.Principal, group dirgate.Object) error
}

var (
	_ Directory = (*dirgate.MemberService)(nil)
	_ Policy    = (*policy.Authorizer)(nil)
)

// API implements the decisions API over the directory, which resolves the
// explored principal and lists the group unfiltered, and the policy, which
// decides.
type API struct {
	dir     Directory
	policy  Policy
	explain *Explainer
	// drafts tells whether a POST may try a draft (--policy-drafts). OPA cannot
	// bound a draft's memory, so they are off unless the operator accepts that any
	// caller allowed to explain can exhaust the gateway's memory.
	drafts bool
	// draftSlot admits one draft at a time (compilation and evaluation): the others
	// are refused at once rather than queued.
	draftSlot chan struct{}
}

// New returns the decisions API over dir and p; drafts lets a POST try a draft
// policy; logger receives evaluation errors (nil: slog.Default()).
func New(dir Directory, p Policy, drafts bool, logger *slog.Logger) *API {
	return &API{dir: dir, policy: p, explain: NewExplainer(p, logger), drafts: drafts, draftSlot: make(chan struct{}, 1)}
}

// Decisions answers one query of the decisions API for caller (proxy.Decisions).
func (d *API) Decisions(ctx context.Context, caller dirgate.Principal, q dirgate.DecisionsQuery) (any, error) {
	if q.Draft != "" {
		if !d.drafts {
			return nil, &dirgate.Error{Code: dirgate.EFORBIDDEN, Param: "module",
				Message: "Drafts are disabled on this gateway (DIRGATE_POLICY_DRAFTS)."}
		}
		select {
		case d.draftSlot <- struct{}{}:
			defer func() { <-d.draftSlot }()
		default:
			return nil, &dirgate.Error{Code: dirgate.ETOOMANY, Param: "module",
				Message: "Another draft is being tried; try again later."}
		}
	}
	// The policy is asked before anything is listed, and before a caller learns
	// whether the subject or group exists: an identifier that resolves to nothing
	// stands for itself (as typed) in the explain decision, so a caller who may not
	// explain gets 403 for known and unknown identifiers alike. It is asked first on
	// the subject as typed, before the subject is looked up (a fresh read and one
	// memberOf read per group): a caller refused there causes no read about the
	// subject and cannot time whether it exists. The group is resolved first, as a
	// listing resolves it before deciding on it.
	group, groupErr := d.dir.Group(ctx, q.Group)
	if groupErr != nil {
		if c := dirgate.ErrorCode(groupErr); c != dirgate.ENOTFOUND && c != dirgate.EINVALID {
			return nil, groupErr
		}
		p := standIn(q.Group)
		group = dirgate.Object{DN: p.DN, GUID: p.GUID, SID: p.SID}
	}
	eq := Query{Caller: caller, Subject: standIn(q.Subject), Group: group, Options: q.Options, Draft: q.Draft}
	if err := d.policy.AllowExplainNamed(ctx, eq.Caller, eq.Subject, eq.Group); err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	subject, err := d.dir.Principal(ctx, q.Subject)
	if err != nil {
		if dirgate.ErrorCode(err) != dirgate.ENOTFOUND {
			return nil, err
		}
		// The decision on the subject as typed is the request's: logged, then 404.
		if err := d.policy.AllowExplain(ctx, eq.Caller, eq.Subject, eq.Group); err != nil {
			return nil, fmt.Errorf("explain: %w", err)
		}
		return nil, unknownSubject(err)
	}
	// Asked again on the resolved subject: a policy may deny by the subject's
	// groups, or by its DN when the request named it by GUID or SID. A refusal
	// here answers as an unknown subject does: the caller was allowed on the
	// subject as named, and a 403 would tell it that a subject it may not explain
	// exists (docs/policy.md, "The decisions API").
	eq.Subject = subject
	if err := d.policy.AllowExplain(ctx, eq.Caller, eq.Subject, eq.Group); err != nil {
		if dirgate.ErrorCode(err) == dirgate.EFORBIDDEN {
			return nil, unknownSubject(err)
		}
		return nil, fmt.Errorf("explain: %w", err)
	}
	if groupErr != nil {
		return nil, groupErr
	}
	objs, err := d.dir.UnfilteredOf(ctx, group, q.Options)
	if err != nil {
		return nil, err
	}
	eq.Objects = objs
	ex, err := d.explain.Compare(ctx, eq)
	var de *DraftError
	if errors.As(err, &de) {
		return nil, &dirgate.Error{Code: dirgate.EINVALID, Param: "module", Message: de.Error(), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	return ex, nil
}

// unknownSubject is the answer for a subject that does not exist, or that the
// caller may not explain once resolved: the same 404 for both.
func unknownSubject(err error) error {
	return &dirgate.Error{Code: dirgate.ENOTFOUND, Param: "subject", Message: "The subject does not exist.", Err: err}
}

// standIn is the principal an unresolved identifier stands for: itself, as typed,
// with a DN's domain name taken from it as a resolved principal's is.
func standIn(id dirgate.Identifier) dirgate.Principal {
	switch id.Kind() {
	case dirgate.KindGUID:
		return dirgate.Principal{GUID: id.Canonical()}
	case dirgate.KindSID:
		return dirgate.Principal{SID: id.Canonical()}
	}
	return dirgate.Principal{DN: id.String(), DomainName: id.DN().DomainName()}
}
