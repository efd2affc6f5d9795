package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"go.opentelemetry.io/otel/attribute"

	"github.com/dirgate/dirgate"
)

// ActionSignIn is input.action of the sign-in rule.
const ActionSignIn = "signin"

// signInPath is the optional sign-in rule (docs/policy.md, "Who may sign in").
const signInPath = packagePath + ".signin"

var signInRef = ast.MustParseRef(signInPath)

// AllowSignIn decides whether p may sign in (docs/policy.md, "Who may sign in"):
// when the policy has no rule data.dirgate.authz.signin, anyone whose password the
// directory accepted may, as with the product's defaults; when it has one, only the
// boolean true allows (undefined, any other value or an evaluation error denies). The input is
// {"action": "signin", "subject": p}. A refusal is EFORBIDDEN; the decision is
// logged as the others are, under the path dirgate/authz/signin.
//
// The query is compiled per call: sign-ins are rare beside listings, and this keeps
// the rule out of the prepared queries of every policy version.
func (a *Authorizer) AllowSignIn(ctx context.Context, p dirgate.Principal) error {
	start := time.Now()
	ctx, span := tracer().Start(ctx, "policy signin decision")
	defer span.End()
	v := a.current.Load()
	in := Input{Action: ActionSignIn, Subject: p}.normalize()
	val, _, err := astValue(in)
	allowed, defined := false, false
	if err == nil {
		var rs rego.ResultSet
		rs, err = rego.New(rego.Query(signInPath), rego.Compiler(v.compiler), rego.Store(v.store),
			rego.ParsedInput(val)).Eval(ctx)
		switch {
		case err != nil:
			err = fmt.Errorf("evaluate %s: %w", signInPath, err)
		case len(rs) == 0:
			// No rule at all: anyone with valid credentials. A rule that is
			// undefined for this subject denies, as an undefined allow does.
			allowed = len(v.compiler.GetRulesExact(signInRef)) == 0
		default:
			defined = true
			b, ok := rs[0].Expressions[0].Value.(bool)
			allowed = ok && b
		}
	}
	if err != nil {
		if isContextErr(err) && ctx.Err() != nil {
			return fmt.Errorf("policy: %w", err)
		}
		allowed = false
		a.logger.Error("policy: sign-in rule evaluation failed; sign-in denied", "revision", v.revision, "subject", p.GUID, "err", err)
	}
	if a.dlog != nil {
		a.dlog.Change(ctx, ChangeDecision{Revision: v.revision, Input: in, Elapsed: time.Since(start), Path: signInLogPath,
			Allowed: allowed, Failed: err != nil, Defined: &defined})
	}
	decision := map[bool]string{true: "allow", false: "deny"}[allowed]
	span.SetAttributes(attribute.String("dirgate.policy.revision", v.revision), attribute.String("dirgate.policy.decision", decision))
	if !allowed {
		return &dirgate.Error{Code: dirgate.EFORBIDDEN, Message: "The policy does not allow this account to sign in.", Err: err}
	}
	return nil
}
