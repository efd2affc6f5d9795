package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

func filesOf(module string) fstest.MapFS {
	return fstest.MapFS{"authz.rego": &fstest.MapFile{Data: []byte(module)}}
}

// TestDeliveredFiles: a policy delivered as files (Config.Files) is replaced by
// each delivery that loads; one that does not, or a refused delivery, keeps the
// last good version, reported by Ready under the deliverer's name until the next
// good delivery. A directory policy cannot be replaced.
func TestDeliveredFiles(t *testing.T) {
	ctx := context.Background()
	a, err := policy.Open(ctx, policy.Config{Files: filesOf(policytest.AllowUsers), Source: "bundles [authz]", Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first := a.Revision()
	if a.Status().Source != "bundles [authz]" {
		t.Errorf("Source = %q", a.Status().Source)
	}
	if err := a.Replace(ctx, filesOf("package dirgate.authz\n\nallow := true\n")); err != nil {
		t.Fatal(err)
	}
	second := a.Revision()
	if second == first {
		t.Fatal("the revision did not change with the delivery")
	}
	if err := a.Replace(ctx, filesOf("package dirgate.authz\n\nallow if {\n")); err == nil {
		t.Error("a delivery that does not compile was accepted")
	}
	if a.Revision() != second {
		t.Errorf("revision %s after a bad delivery, want %s", a.Revision(), second)
	}
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "bundles [authz]") || !strings.Contains(err.Error(), second) {
		t.Errorf("Ready = %v, want the source and the revision in force named", err)
	}
	if err := a.Replace(ctx, filesOf("package dirgate.authz\n\nallow := true\n")); err != nil || a.Ready() != nil {
		t.Errorf("a good delivery: %v, Ready %v", err, a.Ready())
	}
	a.Refuse(ctx, errors.New("signature mismatch"))
	if st := a.Status(); !strings.Contains(st.LastError, "signature mismatch") || a.Revision() != second {
		t.Errorf("after Refuse: %+v", st)
	}

	d, err := policy.Open(ctx, policy.Config{Logger: policytest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Replace(ctx, filesOf(policytest.AllowUsers)); err == nil {
		t.Error("the bundled policy was replaced")
	}
	if _, err := policy.Open(ctx, policy.Config{Dir: t.TempDir(), Files: filesOf(policytest.AllowUsers)}); err == nil {
		t.Error("Dir and Files together were accepted")
	}
}
