package session

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/redistest"
	"github.com/redis/go-redis/v9"
)

// The service's tests run against the in-process backend and a real redis-server
// (backends), with fakes for the credential checker, the principal resolver, the
// sign-in policy and the tokens file.

const (
	danaGUID = "2b1f0c5e-8a7d-4f3b-9c1e-0d2a4b6c8e10"
	hugoGUID = "7c0d9e8f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"
)

var (
	dana = dirgate.Principal{DN: "CN=Dana Admin,OU=IT,DC=corp,DC=example,DC=com", GUID: danaGUID, SID: "S-1-5-21-1-2-3-1101",
		DisplayName: "Dana Admin", Groups: []dirgate.GroupRef{{DN: "CN=Admins,DC=corp,DC=example,DC=com"}}}
	hugo = dirgate.Principal{DN: "CN=Hugo Helpdesk,OU=IT,DC=corp,DC=example,DC=com", GUID: hugoGUID, SID: "S-1-5-21-1-2-3-1102",
		DisplayName: "Hugo Helpdesk"}
)

// fakeChecker answers CheckPassword from a table keyed by "name\x00password";
// anything else is a wrong password (52e), as the LDAP upstream answers it.
type fakeChecker struct {
	mu      sync.Mutex
	answers map[string]checkAnswer
	calls   []string // the names checked, as given
}

type checkAnswer struct {
	subject string // a GUID; "" for none
	err     error
}

func (c *fakeChecker) set(name, password string, a checkAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = map[string]checkAnswer{}
	}
	c.answers[name+"\x00"+password] = a
}

func (c *fakeChecker) CheckPassword(_ context.Context, name dirgate.SignInName, password string) (dirgate.Identifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, name.String())
	a, ok := c.answers[name.String()+"\x00"+password]
	if !ok {
		return dirgate.Identifier{}, &dirgate.SignInError{Reason: dirgate.ReasonInvalidCredentials, DataCode: "52e"}
	}
	var id dirgate.Identifier
	if a.subject != "" {
		id = dirgate.MustParseIdentifier(a.subject)
	}
	return id, a.err
}

// fakeResolver resolves the subjects it knows; an unknown one is EUNAUTHENTICATED,
// as tokenfile.File.Principal answers a subject gone from the directory. err, when
// set, is the answer to every call (the directory down).
type fakeResolver struct {
	mu    sync.Mutex
	known map[string]dirgate.Principal
	err   error
	calls []string // canonical subjects asked for
}

func (r *fakeResolver) Principal(_ context.Context, subject dirgate.Identifier) (dirgate.Principal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, subject.Canonical())
	if r.err != nil {
		return dirgate.Principal{}, r.err
	}
	p, ok := r.known[subject.Canonical()]
	if !ok {
		return dirgate.Principal{}, errUnauthenticated
	}
	return p, nil
}

func (r *fakeResolver) forget(guid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, guid)
}

func (r *fakeResolver) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// fakePolicy is the sign-in rule: it refuses the GUIDs in deny (EFORBIDDEN, as
// policy.Authorizer.AllowSignIn does) and answers err, when set, to everyone.
type fakePolicy struct {
	mu   sync.Mutex
	deny map[string]bool
	err  error
	seen []dirgate.Principal
}

func (p *fakePolicy) AllowSignIn(_ context.Context, pr dirgate.Principal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, pr)
	if p.err != nil {
		return p.err
	}
	if p.deny[pr.GUID] {
		return dirgate.Errorf(dirgate.EFORBIDDEN, "the sign-in rule refuses this account")
	}
	return nil
}

// fakeTokens is the tokens file: static tokens and their principals.
type fakeTokens struct {
	mu     sync.Mutex
	tokens map[string]dirgate.Principal
	calls  []string
}

func (f *fakeTokens) Authenticate(_ context.Context, token string) (dirgate.Principal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, token)
	p, ok := f.tokens[token]
	if !ok {
		return dirgate.Principal{}, errUnauthenticated
	}
	return p, nil
}

type fixture struct {
	svc      *Service
	checker  *fakeChecker
	resolver *fakeResolver
	policy   *fakePolicy
	tokens   *fakeTokens
	clk      *clock
	backend  Backend
	raw      *redis.Client // nil for the in-process backend
}

// newFixture builds a Service on b with a fake clock (the store's and, in process,
// the backend's): Dana and Hugo have passwords, both resolve, the policy allows
// both, and the tokens file holds one static token for Hugo. Lifetimes are those of
// newStore: sessions one minute, tokens two.
func newFixture(t *testing.T, b Backend, raw *redis.Client) *fixture {
	t.Helper()
	clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	if m, ok := b.(*MemoryBackend); ok {
		m.now = clk.Now
	}
	f := &fixture{
		checker:  &fakeChecker{},
		resolver: &fakeResolver{known: map[string]dirgate.Principal{danaGUID: dana, hugoGUID: hugo}},
		policy:   &fakePolicy{deny: map[string]bool{}},
		tokens:   &fakeTokens{tokens: map[string]dirgate.Principal{"static-hugo": hugo}},
		clk:      clk,
		backend:  b,
		raw:      raw,
	}
	f.checker.set("dana.admin@corp.example.com", "Right-1", checkAnswer{subject: danaGUID})
	f.checker.set(`CORP\dana.admin`, "Right-1", checkAnswer{subject: danaGUID})
	f.checker.set("hugo.helpdesk@corp.example.com", "Right-2", checkAnswer{subject: hugoGUID})
	f.svc = &Service{Store: newStore(t, b, clk, nil), Checker: f.checker, Principals: f.resolver,
		Fallback: f.tokens, Policy: f.policy}
	return f
}

// records counts what the backend holds.
func (f *fixture) records(t *testing.T) int {
	t.Helper()
	if f.raw != nil {
		n, err := f.raw.DBSize(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	m := f.backend.(*MemoryBackend)
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

func signInName(t *testing.T, s string) dirgate.SignInName {
	t.Helper()
	n, err := dirgate.ParseSignInName(s)
	if err != nil {
		t.Fatalf("ParseSignInName(%q): %v", s, err)
	}
	return n
}

// signIn creates a session and exchanges it.
func (f *fixture) signIn(t *testing.T, name, password string) (dirgate.SignInSession, dirgate.SignInToken) {
	t.Helper()
	ctx := context.Background()
	ses, err := f.svc.CreateSession(ctx, signInName(t, name), password)
	if err != nil {
		t.Fatalf("sign in as %s: %v", name, err)
	}
	tok, err := f.svc.Exchange(ctx, ses.ID)
	if err != nil {
		t.Fatalf("exchange %s's session: %v", name, err)
	}
	return ses, tok
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := dirgate.ErrorCode(err); got != code {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

// wantRefusal checks that err is a sign-in refusal (403 in the product's body) for
// reason.
func wantRefusal(t *testing.T, what string, err error, reason string) *dirgate.SignInError {
	t.Helper()
	var se *dirgate.SignInError
	if !errors.As(err, &se) {
		t.Errorf("%s: error %v, want a refusal for %s", what, err, reason)
		return nil
	}
	if se.Reason != reason {
		t.Errorf("%s: reason %q, want %q", what, se.Reason, reason)
	}
	wantCode(t, what, err, dirgate.EFORBIDDEN)
	return se
}

func TestServiceSignInAndExchange(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		for _, name := range []string{"dana.admin@corp.example.com", `CORP\dana.admin`} {
			f := newFixture(t, b, raw)
			start := f.clk.Now()
			ses, err := f.svc.CreateSession(ctx, signInName(t, name), "Right-1")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(ses.ID) != 43 || ses.ChangePasswordReason != 0 || !ses.Expires.Equal(start.Add(time.Minute)) {
				t.Errorf("%s: session %+v, want a 43-character id, reason 0, expiry %v", name, ses, start.Add(time.Minute))
			}
			if got := f.checker.calls; len(got) != 1 || got[0] != name {
				t.Errorf("%s: checker asked %q, want the name once, as given", name, got)
			}
			// The account is resolved and the sign-in rule sees its principal before
			// a session exists.
			if !reflect.DeepEqual(f.resolver.calls, []string{danaGUID}) || len(f.policy.seen) != 1 || !reflect.DeepEqual(f.policy.seen[0], dana) {
				t.Errorf("%s: resolver asked %q, policy saw %+v", name, f.resolver.calls, f.policy.seen)
			}
			f.clk.Advance(10 * time.Second)
			tok, err := f.svc.Exchange(ctx, ses.ID)
			if err != nil {
				t.Fatalf("%s: exchange: %v", name, err)
			}
			if !strings.HasPrefix(tok.Token, TokenPrefix) || len(tok.Token) != len(TokenPrefix)+43 ||
				!tok.Expires.Equal(start.Add(10*time.Second+2*time.Minute)) {
				t.Errorf("%s: token %q expiring %v, want dgt_ and 43 characters, expiring two minutes after the exchange", name, tok.Token, tok.Expires)
			}
			// The token acts as the account the checker returned, through the resolver
			// (the shared principal cache); the tokens file is not asked.
			p, err := f.svc.Authenticate(ctx, tok.Token)
			if err != nil || !reflect.DeepEqual(p, dana) {
				t.Errorf("%s: authenticate: %+v %v", name, p, err)
			}
			if len(f.tokens.calls) != 0 {
				t.Errorf("%s: the tokens file was asked about a signed-in token", name)
			}
			// One session, one token.
			_, err = f.svc.Exchange(ctx, ses.ID)
			wantCode(t, name+": second exchange", err, dirgate.EUNAUTHENTICATED)
			if p, err := f.svc.Authenticate(ctx, tok.Token); err != nil || p.GUID != danaGUID {
				t.Errorf("%s: the token after a refused second exchange: %+v %v", name, p, err)
			}
			// Unknown session ids and tokens are 401.
			_, err = f.svc.Exchange(ctx, "no-such-session")
			wantCode(t, name+": unknown session", err, dirgate.EUNAUTHENTICATED)
			_, err = f.svc.Authenticate(ctx, TokenPrefix+"no-such-token")
			wantCode(t, name+": unknown token", err, dirgate.EUNAUTHENTICATED)
			if raw != nil {
				raw.FlushDB(ctx)
			}
		}
	})
}

// TestServiceWithoutPolicy: with no sign-in rule, any account with valid
// credentials signs in.
func TestServiceWithoutPolicy(t *testing.T) {
	f := newFixture(t, NewMemoryBackend(0), nil)
	f.svc.Policy = nil
	_, tok := f.signIn(t, "hugo.helpdesk@corp.example.com", "Right-2")
	if p, err := f.svc.Authenticate(context.Background(), tok.Token); err != nil || p.GUID != hugoGUID {
		t.Errorf("authenticate: %+v %v", p, err)
	}
}

// TestServiceSignInRuleRefuses: the policy's refusal is 403 accessDenied
// (docs/auth.md; docs/policy.md, "Who may sign in"), and no session is stored. Any other
// failure of the rule is passed on with its own code, not as a refusal.
func TestServiceSignInRuleRefuses(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		f.policy.deny[danaGUID] = true
		ses, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
		wantRefusal(t, "refused by the rule", err, dirgate.ReasonAccessDenied)
		if ses.ID != "" || f.records(t) != 0 {
			t.Errorf("refused by the rule: session %+v, %d records stored", ses, f.records(t))
		}
		// Another account still signs in.
		f.signIn(t, "hugo.helpdesk@corp.example.com", "Right-2")

		f.policy.err = dirgate.WrapError(dirgate.ETIMEOUT, "", context.DeadlineExceeded)
		n := f.records(t)
		_, err = f.svc.CreateSession(ctx, signInName(t, "hugo.helpdesk@corp.example.com"), "Right-2")
		var se *dirgate.SignInError
		if errors.As(err, &se) {
			t.Errorf("a failing rule: refusal %v, want its own error", err)
		}
		wantCode(t, "a failing rule", err, dirgate.ETIMEOUT)
		if f.records(t) != n {
			t.Errorf("a failing rule stored a session")
		}
	})
}

// TestServiceUnresolvableAccount: a good bind whose account does not resolve to a
// principal (gone from the directory, or outside what the resolver serves) is 403
// accessDenied, as implemented; the directory being down is its own 5xx code, never
// a 403.
func TestServiceUnresolvableAccount(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		f.resolver.forget(danaGUID)
		_, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
		wantRefusal(t, "unresolvable account", err, dirgate.ReasonAccessDenied)
		if len(f.policy.seen) != 0 || f.records(t) != 0 {
			t.Errorf("unresolvable account: policy asked %d times, %d records stored", len(f.policy.seen), f.records(t))
		}
		for _, code := range []string{dirgate.EUNAVAILABLE, dirgate.EUPSTREAM, dirgate.ETIMEOUT} {
			f.resolver.setErr(dirgate.WrapError(code, "", errors.New("directory down")))
			_, err := f.svc.CreateSession(ctx, signInName(t, "hugo.helpdesk@corp.example.com"), "Right-2")
			var se *dirgate.SignInError
			if errors.As(err, &se) {
				t.Errorf("resolver %s: refusal %v, want the directory's error", code, err)
			}
			wantCode(t, "resolver "+code, err, code)
		}
		if f.records(t) != 0 {
			t.Errorf("%d records stored while the directory was down", f.records(t))
		}
	})
}

// TestServiceCredentialRefusals: every refusal of the checker reaches the caller as
// itself (reason and data code, which the proxy turns into the 403 body and the
// log line), before anything is resolved or stored.
func TestServiceCredentialRefusals(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		for _, c := range []struct{ code, reason string }{
			{"52e", dirgate.ReasonInvalidCredentials},
			{"525", dirgate.ReasonInvalidCredentials},
			{"533", dirgate.ReasonAccountDisabled},
			{"775", dirgate.ReasonAccountLockedOut},
			{"701", dirgate.ReasonAccountExpired},
			{"530", dirgate.ReasonLogonTime},
			{"531", dirgate.ReasonAccessDenied},
			{"568", dirgate.ReasonAccessDenied},
			{"", dirgate.ReasonInvalidCredentials}, // an empty password, never sent
		} {
			name := "user-" + c.code + "@corp.example.com"
			f.checker.set(name, "pw", checkAnswer{err: &dirgate.SignInError{Reason: c.reason, DataCode: c.code,
				Err: fmt.Errorf("bind data code %q", c.code)}})
			ses, err := f.svc.CreateSession(ctx, signInName(t, name), "pw")
			if se := wantRefusal(t, "data code "+c.code, err, c.reason); se != nil && se.DataCode != c.code {
				t.Errorf("data code %s: refusal carries data code %q", c.code, se.DataCode)
			}
			if ses.ID != "" {
				t.Errorf("data code %s: a session %+v", c.code, ses)
			}
		}
		// Unknown names and wrong passwords are the checker's 52e.
		_, err := f.svc.CreateSession(ctx, signInName(t, "nobody@corp.example.com"), "Right-1")
		wantRefusal(t, "unknown user", err, dirgate.ReasonInvalidCredentials)
		_, err = f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "wrong")
		wantRefusal(t, "wrong password", err, dirgate.ReasonInvalidCredentials)
		// The directory failing is its own code, not a refusal.
		f.checker.set("dana.admin@corp.example.com", "Right-1", checkAnswer{err: dirgate.WrapError(dirgate.EUPSTREAM, "", errors.New("connection reset"))})
		_, err = f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
		wantCode(t, "checker failing", err, dirgate.EUPSTREAM)
		if len(f.resolver.calls) != 0 || len(f.policy.seen) != 0 || f.records(t) != 0 {
			t.Errorf("after refusals: resolver asked %q, policy %d times, %d records stored", f.resolver.calls, len(f.policy.seen), f.records(t))
		}
	})
}

// TestServicePasswordMustChange: a right password that has expired (532) or must be
// changed (773) opens a session with changePasswordReason 2 or 1, which yields no
// token: its exchange is 403 passwordChangeNeeded, and consumes it. A checker that
// does not name the account leaves nothing to resolve or ask the sign-in rule
// about (TestServicePasswordMustChangeRule covers one that does).
func TestServicePasswordMustChange(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		for _, c := range []struct {
			code, reason string
			want         int
		}{
			{"773", dirgate.ReasonMustChangePassword, 1},
			{"532", dirgate.ReasonPasswordExpired, 2},
		} {
			name := "user-" + c.code + "@corp.example.com"
			f.checker.set(name, "Right-3", checkAnswer{err: &dirgate.SignInError{Reason: c.reason, DataCode: c.code}})
			ses, err := f.svc.CreateSession(ctx, signInName(t, name), "Right-3")
			if err != nil || ses.ChangePasswordReason != c.want || len(ses.ID) != 43 {
				t.Fatalf("%s: session %+v %v, want changePasswordReason %d", c.code, ses, err, c.want)
			}
			tok, err := f.svc.Exchange(ctx, ses.ID)
			wantRefusal(t, c.code+": exchange", err, dirgate.ReasonPasswordChange)
			if tok.Token != "" {
				t.Errorf("%s: a token %q", c.code, tok.Token)
			}
			if f.records(t) != 0 {
				t.Errorf("%s: %d records after the exchange, want none (no token, session consumed)", c.code, f.records(t))
			}
			_, err = f.svc.Exchange(ctx, ses.ID)
			wantCode(t, c.code+": second exchange", err, dirgate.EUNAUTHENTICATED)
		}
		if len(f.resolver.calls) != 0 || len(f.policy.seen) != 0 {
			t.Errorf("resolver asked %q, policy %d times", f.resolver.calls, len(f.policy.seen))
		}
	})
}

// TestServicePasswordMustChangeRule: when the checker names the account of a right
// password that must be changed (the LDAP upstream does), the account is resolved
// and the sign-in rule asked, as for any sign-in: an account the rule refuses is
// accessDenied and does not learn that its password is right; one it allows gets
// the session that cannot be exchanged.
func TestServicePasswordMustChangeRule(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		must := &dirgate.SignInError{Reason: dirgate.ReasonMustChangePassword, DataCode: "773"}
		f.checker.set("dana.admin@corp.example.com", "Right-9", checkAnswer{subject: danaGUID, err: must})
		f.checker.set("hugo.helpdesk@corp.example.com", "Right-9", checkAnswer{subject: hugoGUID, err: must})
		f.policy.deny[danaGUID] = true
		ses, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-9")
		wantRefusal(t, "must change, refused by the rule", err, dirgate.ReasonAccessDenied)
		if ses.ID != "" || f.records(t) != 0 {
			t.Errorf("refused by the rule: session %+v, %d records stored", ses, f.records(t))
		}
		ses, err = f.svc.CreateSession(ctx, signInName(t, "hugo.helpdesk@corp.example.com"), "Right-9")
		if err != nil || ses.ChangePasswordReason != 1 {
			t.Fatalf("must change, allowed: %+v %v", ses, err)
		}
		_, err = f.svc.Exchange(ctx, ses.ID)
		wantRefusal(t, "must change, allowed: exchange", err, dirgate.ReasonPasswordChange)
		if len(f.policy.seen) != 2 {
			t.Errorf("the rule was asked %d times, want 2", len(f.policy.seen))
		}
	})
}

// TestServiceTokensFile: tokens of the tokens file keep working beside signed-in
// ones. A token without the dgt_ prefix goes to the tokens file and never to the
// store; one with it goes to the store only (so a tokens-file entry for a dgt_
// token is never matched while sign-in is on). Revoking a tokens-file token
// through the sign-in flow does nothing: the file is its only source.
func TestServiceTokensFile(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		_, tok := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		f.tokens.tokens["dgt_in-the-file"] = dana

		p, err := f.svc.Authenticate(ctx, "static-hugo")
		if err != nil || !reflect.DeepEqual(p, hugo) {
			t.Errorf("tokens-file token: %+v %v", p, err)
		}
		if p, err := f.svc.Authenticate(ctx, tok.Token); err != nil || p.GUID != danaGUID {
			t.Errorf("signed-in token beside it: %+v %v", p, err)
		}
		_, err = f.svc.Authenticate(ctx, "unknown-static")
		wantCode(t, "unknown tokens-file token", err, dirgate.EUNAUTHENTICATED)
		_, err = f.svc.Authenticate(ctx, "dgt_in-the-file")
		wantCode(t, "a dgt_ token only the file holds", err, dirgate.EUNAUTHENTICATED)
		if want := []string{"static-hugo", "unknown-static"}; !reflect.DeepEqual(f.tokens.calls, want) {
			t.Errorf("tokens file asked %q, want %q", f.tokens.calls, want)
		}
		if err := f.svc.RevokeToken(ctx, "static-hugo"); err != nil {
			t.Errorf("revoke a tokens-file token: %v", err)
		}
		if p, err := f.svc.Authenticate(ctx, "static-hugo"); err != nil || p.GUID != hugoGUID {
			t.Errorf("tokens-file token after a revocation through the flow: %+v %v", p, err)
		}
		// The tokens file's errors pass through: a 503 stays a 503.
		f.tokens.tokens = nil
		f.svc.Fallback = authFunc(func(context.Context, string) (dirgate.Principal, error) {
			return dirgate.Principal{}, dirgate.WrapError(dirgate.EUNAVAILABLE, "", errors.New("directory down"))
		})
		_, err = f.svc.Authenticate(ctx, "static-hugo")
		wantCode(t, "tokens file with the directory down", err, dirgate.EUNAVAILABLE)
		// Without a tokens file only signed-in tokens exist.
		f.svc.Fallback = nil
		_, err = f.svc.Authenticate(ctx, "static-hugo")
		wantCode(t, "no tokens file", err, dirgate.EUNAUTHENTICATED)
		if p, err := f.svc.Authenticate(ctx, tok.Token); err != nil || p.GUID != danaGUID {
			t.Errorf("signed-in token without a tokens file: %+v %v", p, err)
		}
	})
}

type authFunc func(context.Context, string) (dirgate.Principal, error)

func (f authFunc) Authenticate(ctx context.Context, token string) (dirgate.Principal, error) {
	return f(ctx, token)
}

// TestServiceRevocation: revoking a token ends it; ending a session ends the
// session and the token it gave; both are idempotent. Two services sharing a
// backend and the secret (two replicas) see each other's tokens and revocations.
func TestServiceRevocation(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		// Another replica: its own Store on the same backend, with the same secret.
		replica := &Service{Store: newStore(t, b, f.clk, nil), Checker: f.checker, Principals: f.resolver}
		if raw != nil {
			c := redis.NewClient(&redis.Options{Addr: raw.Options().Addr})
			t.Cleanup(func() { c.Close() })
			replica.Store = newStore(t, NewRedisBackend(c, "test:auth:", time.Second), f.clk, nil)
		}
		dead := func(what, token string) {
			t.Helper()
			for i, s := range []*Service{f.svc, replica} {
				_, err := s.Authenticate(ctx, token)
				wantCode(t, fmt.Sprintf("%s, replica %d", what, i), err, dirgate.EUNAUTHENTICATED)
			}
		}
		alive := func(what, token string) {
			t.Helper()
			for i, s := range []*Service{f.svc, replica} {
				if p, err := s.Authenticate(ctx, token); err != nil || p.GUID != danaGUID {
					t.Errorf("%s, replica %d: %+v %v", what, i, p, err)
				}
			}
		}

		// A token revoked on the other replica.
		_, tok := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		alive("issued", tok.Token)
		if err := replica.RevokeToken(ctx, tok.Token); err != nil {
			t.Fatal(err)
		}
		dead("revoked", tok.Token)
		if err := replica.RevokeToken(ctx, tok.Token); err != nil {
			t.Errorf("revoking again: %v", err)
		}

		// A session ended after its exchange takes its token along.
		ses, tok := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		if err := replica.EndSession(ctx, ses.ID); err != nil {
			t.Fatal(err)
		}
		dead("session ended", tok.Token)
		_, err := f.svc.Exchange(ctx, ses.ID)
		wantCode(t, "exchange of an ended session", err, dirgate.EUNAUTHENTICATED)
		if err := f.svc.EndSession(ctx, ses.ID); err != nil {
			t.Errorf("ending again: %v", err)
		}

		// A session ended before its exchange cannot be exchanged.
		ses2, err := f.svc.CreateSession(ctx, signInName(t, `CORP\dana.admin`), "Right-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := replica.EndSession(ctx, ses2.ID); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.Exchange(ctx, ses2.ID)
		wantCode(t, "exchange after the session ended", err, dirgate.EUNAUTHENTICATED)

		// A session exchanged on one replica, the second exchange tried on the other,
		// and then ended there: the token still ends (the used record was restored).
		ses3, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
		if err != nil {
			t.Fatal(err)
		}
		tok3, err := replica.Exchange(ctx, ses3.ID)
		if err != nil {
			t.Fatal(err)
		}
		alive("exchanged on the other replica", tok3.Token)
		_, err = f.svc.Exchange(ctx, ses3.ID)
		wantCode(t, "second exchange on the first replica", err, dirgate.EUNAUTHENTICATED)
		if err := f.svc.EndSession(ctx, ses3.ID); err != nil {
			t.Fatal(err)
		}
		dead("session ended after a refused second exchange", tok3.Token)

		// Revoking one token leaves the others.
		_, a := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		_, b2 := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		if err := f.svc.RevokeToken(ctx, a.Token); err != nil {
			t.Fatal(err)
		}
		dead("revoked sibling", a.Token)
		alive("the sibling's sibling", b2.Token)

		// Unknown things are no errors.
		if err := f.svc.RevokeToken(ctx, TokenPrefix+"never-issued"); err != nil {
			t.Error(err)
		}
		if err := f.svc.EndSession(ctx, "never-created"); err != nil {
			t.Error(err)
		}

		// The account gone from the directory: its live token no longer names anyone.
		f.resolver.forget(danaGUID)
		dead("account gone", b2.Token)
	})
}

// TestServiceExpiry: with a fake clock, a session expires after the session
// lifetime and a token after the token lifetime, each at the exact instant. In
// Redis the key's own TTL is still running (the clock is fake): the expiry inside
// the sealed record is what ends them.
func TestServiceExpiry(t *testing.T) {
	backends(t, func(t *testing.T, b Backend, raw *redis.Client) {
		ctx := context.Background()
		f := newFixture(t, b, raw)
		name := signInName(t, "dana.admin@corp.example.com")

		ses, err := f.svc.CreateSession(ctx, name, "Right-1")
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute)
		_, err = f.svc.Exchange(ctx, ses.ID)
		wantCode(t, "session at its expiry", err, dirgate.EUNAUTHENTICATED)

		ses, err = f.svc.CreateSession(ctx, name, "Right-1")
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute - time.Nanosecond)
		tok, err := f.svc.Exchange(ctx, ses.ID)
		if err != nil {
			t.Fatalf("session just before its expiry: %v", err)
		}
		if !tok.Expires.Equal(f.clk.Now().Add(2 * time.Minute)) {
			t.Errorf("token expires %v, want two minutes after the exchange", tok.Expires)
		}
		f.clk.Advance(2*time.Minute - time.Nanosecond)
		if _, err := f.svc.Authenticate(ctx, tok.Token); err != nil {
			t.Errorf("token just before its expiry: %v", err)
		}
		f.clk.Advance(time.Nanosecond)
		_, err = f.svc.Authenticate(ctx, tok.Token)
		wantCode(t, "token at its expiry", err, dirgate.EUNAUTHENTICATED)

		// A must-change session expires as well.
		f.checker.set("user-773@corp.example.com", "Right-3", checkAnswer{err: &dirgate.SignInError{Reason: dirgate.ReasonMustChangePassword, DataCode: "773"}})
		ses, err = f.svc.CreateSession(ctx, signInName(t, "user-773@corp.example.com"), "Right-3")
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Minute)
		_, err = f.svc.Exchange(ctx, ses.ID)
		wantCode(t, "must-change session at its expiry", err, dirgate.EUNAUTHENTICATED)
	})
}

// failingBackend fails every command, as an unreachable Redis does.
type failingBackend struct{}

var errBackendDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (failingBackend) Get(context.Context, string) (string, bool, error) {
	return "", false, errBackendDown
}
func (failingBackend) Set(context.Context, string, string, time.Duration) error {
	return errBackendDown
}
func (failingBackend) GetDel(context.Context, string) (string, bool, error) {
	return "", false, errBackendDown
}
func (failingBackend) Del(context.Context, ...string) error { return errBackendDown }

// TestServiceStoreDown: the store failing is 503 for every operation, never 401
// (a client must not throw away a valid token) and never a sign-in refusal. The
// tokens file keeps working. Run with a backend that fails and with a real Redis
// that was stopped.
func TestServiceStoreDown(t *testing.T) {
	check := func(t *testing.T, f *fixture, tok string, sessionID string) {
		t.Helper()
		ctx := context.Background()
		_, err := f.svc.CreateSession(ctx, signInName(t, "dana.admin@corp.example.com"), "Right-1")
		wantCode(t, "create session", err, dirgate.EUNAVAILABLE)
		var se *dirgate.SignInError
		if errors.As(err, &se) {
			t.Errorf("create session with the store down: a refusal %v", err)
		}
		_, err = f.svc.Exchange(ctx, sessionID)
		wantCode(t, "exchange", err, dirgate.EUNAVAILABLE)
		_, err = f.svc.Authenticate(ctx, tok)
		wantCode(t, "authenticate", err, dirgate.EUNAVAILABLE)
		wantCode(t, "revoke", f.svc.RevokeToken(ctx, tok), dirgate.EUNAVAILABLE)
		wantCode(t, "end session", f.svc.EndSession(ctx, sessionID), dirgate.EUNAVAILABLE)
		if p, err := f.svc.Authenticate(ctx, "static-hugo"); err != nil || p.GUID != hugoGUID {
			t.Errorf("tokens-file token with the store down: %+v %v", p, err)
		}
	}
	t.Run("failing backend", func(t *testing.T) {
		f := newFixture(t, failingBackend{}, nil)
		check(t, f, TokenPrefix+"whatever", "whatever")
	})
	t.Run("redis stopped", func(t *testing.T) {
		srv := redistest.Start(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		f := newFixture(t, NewRedisBackend(c, "test:auth:", time.Second), c)
		ses, tok := f.signIn(t, "dana.admin@corp.example.com", "Right-1")
		ses2, err := f.svc.CreateSession(context.Background(), signInName(t, "dana.admin@corp.example.com"), "Right-1")
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		check(t, f, tok.Token, ses2.ID)
		wantCode(t, "end an exchanged session", f.svc.EndSession(context.Background(), ses.ID), dirgate.EUNAVAILABLE)
	})
}
