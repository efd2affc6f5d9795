package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/suite/conformance"
	"github.com/dirgate/dirgate/upstream/memory"
)

const faultEnv = "DIRGATE_CONFORMANCE_FAULT"

// A suite that passes whatever the directory does proves nothing. Each case runs the
// suite, in a child process, against the demo directory with one fault, and requires
// the subtest that owns that behaviour to fail.
func TestSuiteDetectsFaults(t *testing.T) {
	tests := []struct {
		fault    string
		wantFail string // a subtest that must report the fault
	}{
		// Members without the primaryGroupID members.
		{"no-primary-members", "Listing/PrimaryGroupMember"},
		// A removal that reports success and changes nothing.
		{"remove-noop", "Remove"},
		// An addition that reports success and changes nothing.
		{"add-noop", "Add"},
		// SIDs that resolve to nothing.
		{"sid-not-found", "Lookup/IdentifierForms"},
		// DNs compared as strings, not as names.
		{"case-sensitive-dn", "Lookup/IdentifierForms"},
		// Lockout read from userAccountControl, where AD does not keep it.
		{"lost-lockout", "Listing/AccountStates"},
		// "Not found" reported as an upstream failure.
		{"not-found-as-upstream-error", "Lookup/BadInput"},
		// Properties keyed as the client spelled them.
		{"property-key-case", "Listing/Properties"},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFaultyDirectory$", "-test.count=1")
			cmd.Env = append(os.Environ(), faultEnv+"="+tt.fault)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a directory with fault %s", tt.fault)
			}
			if want := "--- FAIL: TestFaultyDirectory/" + tt.wantFail; !strings.Contains(string(out), want) {
				t.Errorf("fault %s: output lacks %q:\n%s", tt.fault, want, out)
			}
		})
	}
}

// TestFaultyDirectory is TestSuiteDetectsFaults' child; it only runs with faultEnv set.
func TestFaultyDirectory(t *testing.T) {
	fault := os.Getenv(faultEnv)
	if fault == "" {
		t.Skip("runs as the child process of TestSuiteDetectsFaults")
	}
	conformance.Run(t, func(t *testing.T) dirgate.Directory {
		d, err := memory.Demo()
		if err != nil {
			t.Fatal(err)
		}
		return faulty{inner: d, fault: fault}
	}, fixture.Demo())
}

// faulty wraps a correct directory and breaks one behaviour.
type faulty struct {
	inner dirgate.Directory
	fault string
}

func (f faulty) Lookup(ctx context.Context, id dirgate.Identifier, props []string) (dirgate.Object, error) {
	switch {
	case f.fault == "sid-not-found" && id.Kind() == dirgate.KindSID:
		return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
	}
	o, err := f.inner.Lookup(ctx, id, props)
	switch {
	case f.fault == "case-sensitive-dn" && err == nil && id.Kind() == dirgate.KindDN && id.String() != o.DN:
		return dirgate.Object{}, dirgate.Errorf(dirgate.ENOTFOUND, "not found")
	case f.fault == "not-found-as-upstream-error" && dirgate.ErrorCode(err) == dirgate.ENOTFOUND:
		return dirgate.Object{}, dirgate.WrapError(dirgate.EUPSTREAM, "", fmt.Errorf("lookup: %w", err))
	}
	return f.break1(o), err
}

func (f faulty) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	ms, err := f.inner.Members(ctx, group, props)
	out := ms[:0:0]
	for _, m := range ms {
		if f.fault == "no-primary-members" && m.PrimaryGroupID != 0 {
			if rid, _ := ldapentry.RID(group.SID); rid == m.PrimaryGroupID {
				continue
			}
		}
		out = append(out, f.break1(m))
	}
	return out, err
}

func (f faulty) MemberOf(ctx context.Context, obj dirgate.Object) ([]dirgate.Object, error) {
	return f.inner.MemberOf(ctx, obj)
}

func (f faulty) RemoveMember(ctx context.Context, group, member dirgate.Object) error {
	if f.fault == "remove-noop" {
		return nil
	}
	return f.inner.RemoveMember(ctx, group, member)
}

func (f faulty) AddMember(ctx context.Context, group, member dirgate.Object) error {
	if f.fault == "add-noop" {
		return nil
	}
	return f.inner.AddMember(ctx, group, member)
}

// break1 applies the rendering faults to one object.
func (f faulty) break1(o dirgate.Object) dirgate.Object {
	switch f.fault {
	case "lost-lockout":
		if o.AccountStatus != nil {
			a := *o.AccountStatus
			a.IsLocked = false
			o.AccountStatus = &a
		}
	case "property-key-case":
		if v, ok := o.Properties["objectguid"]; ok {
			o.Properties = map[string][]string{"objectGUID": v}
		}
	}
	return o
}
