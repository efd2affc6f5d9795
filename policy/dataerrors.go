package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// dataErrorsPath is the optional rule by which a policy names the mistakes in its
// own data (the bundled policy checks its roles: rego/authz.rego): a set of
// messages. A policy whose data_errors is not empty does not load.
const dataErrorsPath = packagePath + ".data_errors"

var dataErrorsRef = ast.MustParseRef(dataErrorsPath)

// maxDataErrors bounds the messages an error quotes; the rest are counted.
const maxDataErrors = 10

// ErrPolicyData is wrapped by the error of a policy whose data_errors is not empty.
var ErrPolicyData = errors.New("policy data is invalid")

// checkData evaluates the policy's data_errors, when it defines the rule, and
// fails when it names any mistake: a role whose data the policy reads otherwise
// than its author meant must not decide (a misspelt key that restricts a role
// would widen it).
func (v *version) checkData(ctx context.Context) error {
	if len(v.compiler.GetRulesExact(dataErrorsRef)) == 0 {
		return nil
	}
	rs, err := rego.New(rego.Query(dataErrorsPath), rego.Compiler(v.compiler), rego.Store(v.store),
		rego.StrictBuiltinErrors(false)).Eval(ctx)
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", dataErrorsPath, err)
	}
	if len(rs) == 0 {
		return nil
	}
	var msgs []string
	switch val := rs[0].Expressions[0].Value.(type) {
	case []any:
		for _, m := range val {
			msgs = append(msgs, fmt.Sprint(m))
		}
	default:
		return fmt.Errorf("%w: %s is not a set of messages", ErrPolicyData, dataErrorsPath)
	}
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	more := ""
	if len(msgs) > maxDataErrors {
		more = fmt.Sprintf("; and %d more", len(msgs)-maxDataErrors)
		msgs = msgs[:maxDataErrors]
	}
	return fmt.Errorf("%w: %s%s", ErrPolicyData, strings.Join(msgs, "; "), more)
}
