package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/policy/internal/policytest"
)

// TestSizeLimitStopsEarlyOnLargeListings: on a listing of 100,000 objects decided
// one by one (a rule on each object's name), a size limit of 10 decides the
// objects up to the tenth allowed one and leaves the rest undecided, as the decision
// line says; without a limit all of them are decided: sizeLimit keeps stopping
// early on large listings.
func TestSizeLimitStopsEarlyOnLargeListings(t *testing.T) {
	const n = 100_000
	d := t.TempDir()
	rule := "package dirgate.authz\n\nallow if not startswith(input.object.displayName, \"hidden\")\n"
	if err := os.WriteFile(filepath.Join(d, "authz.rego"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	authz, err := policy.Open(context.Background(), policy.Config{Dir: d, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DecisionLog: policytest.LineLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { authz.Close() })
	objs := make([]dirgate.Object, n)
	for i := range objs {
		name := fmt.Sprintf("user%06d", i)
		if i%3 == 0 {
			name = "hidden" + name
		}
		objs[i] = dirgate.Object{
			DN:          fmt.Sprintf("CN=user%06d,OU=Staff,DC=corp,DC=example,DC=com", i),
			GUID:        fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			ObjectType:  dirgate.TypeUser,
			DisplayName: name,
		}
	}
	group := dirgate.Object{DN: "CN=All Staff,OU=Groups,DC=corp,DC=example,DC=com", GUID: "00000000-0000-4000-8000-999999999999", ObjectType: dirgate.TypeGroup}
	p := dirgate.Principal{DN: "CN=Caller,DC=corp,DC=example,DC=com"}
	var opts dirgate.ListOptions
	for _, tc := range []struct {
		limit                      int
		allowed, denied, undecided int
	}{
		// Objects 0, 3, 6, 9, 12 are Hidden: the tenth allowed one is object 14.
		{10, 10, 5, n - 15},
		{0, n - (n+2)/3, (n + 2) / 3, 0},
	} {
		log.Reset()
		opts.SizeLimit = tc.limit
		sel, err := authz.SelectView(context.Background(), p, group, opts, objs, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Count() != tc.allowed {
			t.Errorf("limit %d: %d objects selected, want %d", tc.limit, sel.Count(), tc.allowed)
		}
		var line struct {
			Result struct{ Allowed, Denied, Undecided int } `json:"result"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &line); err != nil {
			t.Fatalf("limit %d: decision line %q: %v", tc.limit, log.String(), err)
		}
		if r := line.Result; r.Allowed != tc.allowed || r.Denied != tc.denied || r.Undecided != tc.undecided {
			t.Errorf("limit %d: decided %+v, want allowed %d, denied %d, undecided %d", tc.limit, r, tc.allowed, tc.denied, tc.undecided)
		}
	}
}
