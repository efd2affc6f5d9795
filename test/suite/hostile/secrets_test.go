package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate/test/harness/child"
	"github.com/dirgate/dirgate/test/harness/faultproxy"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/dirgate/dirgate/test/harness/sambatest"
)

// secretForms returns the spellings under which a secret could leak: as is, in
// base64, hex and URL encoding, and (for tokens) its SHA-256, which the tokens file
// holds and which must not reach a log either.
func secretForms(name, s string, hashed bool) map[string]string {
	forms := map[string]string{
		name:             s,
		name + " base64": base64.StdEncoding.EncodeToString([]byte(s)),
		name + " hex":    hex.EncodeToString([]byte(s)),
		name + " url":    url.QueryEscape(s),
	}
	if hashed {
		sum := sha256.Sum256([]byte(s))
		forms[name+" sha256"] = hex.EncodeToString(sum[:])
	}
	return forms
}

// TestNoSecretInLogsOrSpans runs the real program against the DC with a known token,
// the service account's password file (and a Redis password when the program has a
// cache), debug logging, and every span exported to standard output
// (OTEL_TRACES_EXPORTER=console). It makes the program log and trace every path that
// touches a secret: valid and wrong tokens (one differing from the real one in its
// last character), the token in the wrong header and in the query string, throttling,
// directory failures while connections are re-dialled and re-bound, and a shutdown
// that flushes the spans. Then it reads every line written to standard output and
// standard error and requires that none holds a secret in any form, after checking
// that the capture is real (request log lines and spans are there).
func TestNoSecretInLogsOrSpans(t *testing.T) {
	dc := sambatest.Env(t)
	child.RequireFixture(t, dc)
	px, ldapURL := child.ProxyDC(t, dc)
	tok := child.NewToken(t, "secret-")
	nearMiss := tok[:len(tok)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", tok[len(tok)-1])+1)%16])
	secrets := secretForms("token", tok, true)
	for k, v := range secretForms("near-miss token", nearMiss, true) {
		secrets[k] = v
	}
	for k, v := range secretForms("LDAP password", dc.Password, false) {
		secrets[k] = v
	}
	env := map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
	if strings.Contains(child.HelpText(t), "[DIRGATE_REDIS_PASSWORD_FILE]") {
		redisPW := child.NewToken(t, "redispw-")
		rds := redistest.Start(t, "--requirepass", redisPW)
		env["DIRGATE_REDIS_ADDR"] = rds.Addr()
		env["DIRGATE_REDIS_PASSWORD_FILE"] = child.WriteFile(t, "redis-password", redisPW)
		for k, v := range secretForms("Redis password", redisPW, false) {
			secrets[k] = v
		}
		// Redis requires the secret that keys the HMACs of what dirgate keeps there.
		cacheSecret := child.NewToken(t, "cache-secret-of-32-bytes-or-more-")
		env["DIRGATE_SECRET_FILE"] = child.WriteFile(t, "secret", cacheSecret)
		for k, v := range secretForms("secret file", cacheSecret, false) {
			secrets[k] = v
		}
	}
	args := append(child.LDAPArgs(t, dc, ldapURL, child.WriteTokens(t, map[string]string{tok: fixture.DemoAdminDN})),
		"--log-level", "debug", "--auth-max-failures", "3", "--breaker-failures", "2", "--breaker-open-timeout", "1s",
		"--ldap-timeout", "5s")
	p := child.Start(t, env, args...)
	ctx := context.Background()
	c := child.NewClient()
	u := child.ListURL(p.Base, fixture.HelpDeskDN, "")
	requests := 0
	do := func(cl *child.Client, method, u, token string) child.Result {
		requests++
		return cl.Do(ctx, method, u, token)
	}

	if r := do(c, "GET", u, tok); r.Status != 200 {
		t.Fatalf("listing with the token: %s", r)
	}
	do(c, "GET", child.ListURL(p.Base, fixture.ITDepartmentDN, "&includeIndirect=true&properties=mail"), tok)
	do(c, "DELETE", child.RemoveURL(p.Base, fixture.HelpDeskDN, "CN=Nobody,"+fixture.GroupsOU), tok)
	do(c, "GET", u+"&x="+url.QueryEscape(tok), tok)         // the token in an ignored parameter
	do(c, "GET", u+"&sizeLimit="+url.QueryEscape(tok), tok) // and in an invalid one
	guesser := child.ClientFrom("127.0.0.2")
	for range 4 { // wrong tokens, then throttled
		do(guesser, "GET", u, nearMiss)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	requests++
	child.NewClient().Send(req)

	// Directory failures: connections refused, then hung, so that dials, binds and
	// the breaker log their errors; then recovery re-dials and re-binds.
	px.SetMode(faultproxy.Refuse)
	px.Cut()
	for i := range 4 {
		do(c, "GET", child.ListURL(p.Base, fixture.ITSupportDN, child.PropsFor(i+1)), tok)
	}
	px.SetMode(faultproxy.Blackhole)
	time.Sleep(1100 * time.Millisecond) // past the breaker's open timeout: the probe dials into the hang
	do(c, "GET", child.ListURL(p.Base, fixture.ITSupportDN, child.PropsFor(10)), tok)
	px.SetMode(faultproxy.Pass)
	child.Eventually(t, 30*time.Second, "the directory answers again", func() (bool, string) {
		r := do(c, "GET", child.ListURL(p.Base, fixture.ITSupportDN, child.PropsFor(11)), tok)
		return r.Status == 200, r.String()
	})
	if err := p.Stop(); err != nil {
		t.Errorf("dirgate exit: %v", err)
	}

	stdout, stderr := p.Output(t)
	// The capture must hold what the run produced, or finding nothing proves nothing.
	if n := bytes.Count(stderr, []byte(`"msg":"http request"`)); n < requests {
		t.Fatalf("standard error has %d request log lines for %d requests", n, requests)
	}
	for _, want := range []string{`"Name":"authenticate"`, `"Name":"GET /restApi/api/directoryObjects/groupMembers"`} {
		if !bytes.Contains(stdout, []byte(want)) {
			t.Fatalf("standard output lacks the span %s: was the console exporter on?", want)
		}
	}
	if !bytes.Contains(stderr, []byte(`"level":"ERROR"`)) || !bytes.Contains(stderr, []byte("circuit breaker changed state")) {
		t.Fatalf("standard error lacks the directory failures")
	}
	for _, out := range []struct {
		name string
		b    []byte
	}{{"standard output (spans, decision log)", stdout}, {"standard error (logs)", stderr}} {
		for i, line := range bytes.Split(out.b, []byte("\n")) {
			for form, s := range secrets {
				if bytes.Contains(line, []byte(s)) {
					t.Errorf("%s line %d holds the %s: %.300s", out.name, i+1, form, line)
				}
			}
		}
	}
	t.Logf("scanned %d bytes of standard output (%d spans) and %d bytes of standard error (%d lines) for %d forms of %d secrets",
		len(stdout), bytes.Count(stdout, []byte(`"SpanContext"`)), len(stderr), bytes.Count(stderr, []byte("\n")), len(secrets), len(secrets)/4)
}
