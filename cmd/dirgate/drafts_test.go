package main

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

// TestDraftsOffByDefault: without --policy-drafts a POSTed draft is refused with
// 403 in the error shape, naming the module; with it, the draft is tried.
func TestDraftsOffByDefault(t *testing.T) {
	query := url.Values{"subject": {hugo}, "group": {"CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com"}}
	body := `{"module": "package dirgate.authz\nallow if input.action == \"explain\"\n"}`
	for _, tt := range []struct {
		args   []string
		status int
	}{{nil, 403}, {[]string{"--policy-drafts"}, 200}} {
		root := startDemoWith(t, append([]string{"--decision-log", "off"}, tt.args...)...)
		r := post(t, root+"/restApi/api/policy/decisions?"+query.Encode(), adminTok, "application/json", body)
		if r.status != tt.status {
			t.Fatalf("%v: POST draft: %d %s, want %d", tt.args, r.status, r.body, tt.status)
		}
		if tt.status != 403 {
			continue
		}
		var e proxy.ErrorResponse
		if err := json.Unmarshal(r.body, &e); err != nil || e.Code != dirgate.EFORBIDDEN || e.Message == "" {
			t.Errorf("refusal is not the error shape: %s (%v)", r.body, err)
		}
		// GET stays available without drafts.
		if g := call(t, "GET", root+"/restApi/api/policy/decisions?"+query.Encode(), adminTok); g.status != 200 {
			t.Errorf("GET without drafts: %d %s", g.status, g.body)
		}
	}
}
