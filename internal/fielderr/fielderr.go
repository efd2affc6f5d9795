// Package fielderr is how an adapter's Validate reports a problem with one field of
// its Config: the field's Go name, and the problem worded to follow it. The adapter
// never knows what its user calls the field; cmd/dirgate binds each setting to a
// field (cmd/dirgate/config.go) and renders the error under the setting's name
// (docs/settings.md), e.g. "ldap-timeout (DIRGATE_LDAP_TIMEOUT): must be positive".
package fielderr

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Error is a problem with the field Field. Its message may name other fields of the
// same Config as {Name}: rendered, each is named as Field is.
type Error struct {
	// Field is the Config field's Go name, e.g. "AttemptTimeout".
	Field string

	format string
	args   []any
}

// New returns the problem of field, worded by format and args as fmt.Errorf does
// (%w wraps). Other fields are named in format, never in args, as {Name}.
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, format: format, args: args}
}

// refs are the fields a message names.
var refs = regexp.MustCompile(`\{[A-Z][A-Za-z0-9]*\}`)

// Render words the problem with name giving the name of each field (Field and those
// the message names).
func (e *Error) Render(name func(field string) string) string {
	format := refs.ReplaceAllStringFunc(e.format, func(ref string) string {
		return strings.ReplaceAll(name(ref[1:len(ref)-1]), "%", "%%")
	})
	return name(e.Field) + ": " + fmt.Errorf(format, e.args...).Error()
}

// Error names the fields by their Go names.
func (e *Error) Error() string { return e.Render(func(field string) string { return field }) }

// Unwrap returns the error the message wraps with %w, if any.
func (e *Error) Unwrap() error { return errors.Unwrap(fmt.Errorf(e.format, e.args...)) }

// Join joins errs (errors.Join) in the order of their fields' names, each field's
// in the order given, so that an adapter that checks fields in a map's order still
// reports them in one order.
func Join(errs ...error) error {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(fieldOf(a), fieldOf(b)) })
	return errors.Join(errs...)
}

func fieldOf(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Field
	}
	return ""
}

// List returns the errors joined in err (errors.Join), or err alone, so that each
// can be rendered on its own line; nil for nil.
func List(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, List(e)...)
		}
		return out
	}
	return []error{err}
}
