package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/dirgate/dirgate"
)

// Actions, the values of input.action.
const (
	ActionView   = "view"
	ActionRemove = "remove"
	ActionAdd    = "add"
)

// Input is the document a policy decides on (docs/policy.md): input.action,
// input.subject (the caller, its account state and its transitive groups),
// input.object (one object of a listing, or the member to remove or add, exactly as
// the client receives objects), input.group (the group listed, removed from or added to) and
// input.request (the listing's parameters; zero values for a removal or an addition).
type Input struct {
	Action  string            `json:"action"`
	Subject dirgate.Principal `json:"subject"`
	Object  *dirgate.Object   `json:"object,omitempty"`
	Group   dirgate.Object    `json:"group"`
	Request Request           `json:"request"`
}

// Request is input.request.
type Request struct {
	IncludeIndirect bool     `json:"includeIndirect"`
	Properties      []string `json:"properties"`
	SizeLimit       int      `json:"sizeLimit"`
}

func requestOf(opts dirgate.ListOptions) Request {
	props := opts.Properties
	if props == nil {
		props = []string{}
	}
	return Request{IncludeIndirect: opts.IncludeIndirect, Properties: props, SizeLimit: opts.SizeLimit}
}

// normalize gives nil slices their JSON form [] so that a policy can iterate them
// and equal inputs have equal cache keys.
func (in Input) normalize() Input {
	if in.Subject.Groups == nil {
		in.Subject.Groups = []dirgate.GroupRef{}
	}
	if in.Request.Properties == nil {
		in.Request.Properties = []string{}
	}
	return in
}

// astValue renders v as JSON and parses it into OPA's value form, so that the
// policy sees exactly what a client would (Object.MarshalJSON, Timestamps).
func astValue(v any) (ast.Value, []byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode policy input: %w", err)
	}
	x, err := ast.ValueFromReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, fmt.Errorf("convert policy input: %w", err)
	}
	return x, b, nil
}
