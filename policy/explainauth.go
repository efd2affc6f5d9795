package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/dirgate/dirgate"
)

// ActionExplain is input.action when a caller asks for another principal's
// decisions (the decisions API, package policy/explain): input.subject is the
// caller, input.object the explored principal, input.group the group.
const ActionExplain = "explain"

// AllowExplain returns an EFORBIDDEN error unless the policy allows caller to see
// subject's decisions in group; the decision is logged. An evaluation error
// denies, and is logged.
func (a *Authorizer) AllowExplain(ctx context.Context, caller, subject dirgate.Principal, group dirgate.Object) error {
	return a.allowExplain(ctx, a.current.Load(), caller, subject, group, true)
}

// AllowExplainNamed is AllowExplain asked before the subject is looked up, with
// subject only as the request names it (its DN, GUID or SID as typed): the
// decisions API refuses a caller denied there without reading the directory about
// the subject. A policy that needs more of the subject (its groups, or its DN when
// it is named by GUID or SID) to allow denies here: fail closed. Only a denial is
// logged; an allowed caller is asked again on the resolved subject, and that is
// logged.
func (a *Authorizer) AllowExplainNamed(ctx context.Context, caller, subject dirgate.Principal, group dirgate.Object) error {
	return a.allowExplain(ctx, a.current.Load(), caller, subject, group, false)
}

// explainInput is the input of an explain decision: the object is a principal.
type explainInput struct {
	Action  string            `json:"action"`
	Subject dirgate.Principal `json:"subject"`
	Object  dirgate.Principal `json:"object"`
	Group   dirgate.Object    `json:"group"`
	Request Request           `json:"request"`
}

func (a *Authorizer) allowExplain(ctx context.Context, v *version, caller, subject dirgate.Principal, group dirgate.Object, logAllowed bool) error {
	start := time.Now()
	in := explainInput{Action: ActionExplain, Subject: Input{Subject: caller}.normalize().Subject,
		Object: Input{Subject: subject}.normalize().Subject, Group: group, Request: requestOf(dirgate.ListOptions{})}
	val, _, err := astValue(in)
	if err != nil {
		return err
	}
	o, err := v.decide(ctx, val)
	if err != nil {
		if isContextErr(err) && ctx.Err() != nil {
			return fmt.Errorf("policy: %w", err)
		}
		a.logger.Error("policy: evaluation failed; explain denied", "revision", v.revision, "err", err)
	}
	allowed := err == nil && o.allowed
	// Logged like a removal: the explored principal is the object.
	logged := Input{Action: ActionExplain, Subject: caller, Object: &dirgate.Object{DN: subject.DN, GUID: subject.GUID},
		Group: group, Request: requestOf(dirgate.ListOptions{})}.normalize()
	if !allowed || logAllowed {
		a.logChange(ctx, v.revision, logged, allowed, err, start, nil)
	}
	if !allowed {
		return &dirgate.Error{Code: dirgate.EFORBIDDEN, Message: "You are not allowed to see this principal's decisions in this group.", Err: err}
	}
	return nil
}
