// Package proxy is dirgate's HTTP layer: it serves the group-membership API of
// the directory-management product (docs/api.md is its contract),
// authenticates callers, throttles token guessing, maps dirgate's coded errors to
// statuses in one table and logs one line per request. It knows nothing about
// directories: it calls a Service (and a BodyLister, for listings) and an
// Authenticator.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/telemetry"
)

// Service is what the API needs from the domain. *dirgate.MemberService implements it;
// declaring it here keeps the handler testable with a fake.
type Service interface {
	List(ctx context.Context, p dirgate.Principal, group dirgate.Identifier, opts dirgate.ListOptions) ([]dirgate.Object, error)
	Remove(ctx context.Context, p dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error)
	Add(ctx context.Context, p dirgate.Principal, group, member dirgate.Identifier) (dirgate.OperationResult, error)
}

var _ Service = (*dirgate.MemberService)(nil)

// DefaultBasePath is the virtual directory clients of the product put in their base
// URL (docs/compatibility.md, "Requests").
const DefaultBasePath = "/restApi"

// ResourcePath is the API's one resource, below the base path.
const ResourcePath = "/api/directoryObjects/groupMembers"

// Config is the handler's factory: zero fields take the defaults documented on them.
type Config struct {
	// BasePath is the path before ResourcePath: "" means DefaultBasePath and "/" means
	// none (the resource is then served at /api/...). It must start with "/", must not
	// end with one, and is matched without regard to ASCII letter case.
	BasePath string
	// Authenticator turns the Adm-Authorization token into a principal. Required.
	Authenticator dirgate.Authenticator
	// Service lists, removes and adds members. Required.
	Service Service
	// Bodies, when set, answers listings (GET) with bodies it renders and shares
	// between requests (render.Lister). nil encodes Service.List's answer for each
	// request.
	Bodies BodyLister
	// SignIn serves the sign-in flow's paths (signin.go); nil serves none of them.
	SignIn SignIn
	// Logger receives one line per request and the detail of server-side errors.
	// nil means slog.Default().
	Logger *slog.Logger
	// Throttle bounds failed authentications and password checks per client
	// address (*throttle.Throttle). Required.
	Throttle Throttle
	// ClientAddr names the client whose failed authentications are counted. nil means
	// the connection's remote address (an IPv6 client by its /64). Forwarded headers
	// are not trusted unless a ClientAddr that reads them is configured
	// (ForwardedClientAddr, clientaddr.go).
	ClientAddr func(*http.Request) string
	// Mounts are extra handlers (health, readiness, metrics) served at exact,
	// case-sensitive paths outside the base path, for any method and without
	// authentication. Their requests are logged at debug level.
	Mounts map[string]http.Handler
	// Now is the clock of request durations. nil means time.Now.
	Now func() time.Time
	// BodyReadTimeout bounds the time from the handler's start to the end of the
	// request body. 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// Decisions, when set, serves the decisions API at DecisionsPath below the base
	// path (decisions.go).
	Decisions Decisions
	// Idle, when set, is called once a request has been logged and no other request
	// is in flight: cmd/dirgate writes the log lines waiting in their batches then,
	// so that a server answering one request at a time does not wake up again for
	// them after the batch interval (docs/operations.md, "Logs").
	Idle func()
}

// Validate reports every problem of the configuration at once, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Authenticator == nil {
		errs = append(errs, errors.New("proxy: Authenticator is required"))
	}
	if c.Service == nil {
		errs = append(errs, errors.New("proxy: Service is required"))
	}
	if err := validateBasePath(c.BasePath); err != nil {
		errs = append(errs, err)
	}
	if c.Throttle == nil {
		errs = append(errs, errors.New("proxy: Throttle is required"))
	}
	if c.BodyReadTimeout < 0 {
		errs = append(errs, errors.New("proxy: BodyReadTimeout must not be negative"))
	}
	api := apiPath(c.BasePath)
	for p, h := range c.Mounts {
		switch {
		case h == nil:
			errs = append(errs, fmt.Errorf("proxy: mount %q has no handler", p))
		case !strings.HasPrefix(p, "/"):
			errs = append(errs, fmt.Errorf("proxy: mount %q does not start with /", p))
		case c.BasePath != "/" && hasPathPrefixFold(p, c.BasePath):
			errs = append(errs, fmt.Errorf("proxy: mount %q is inside the base path", p))
		case asciiEqualFold(strings.TrimSuffix(p, "/"), api):
			errs = append(errs, fmt.Errorf("proxy: mount %q is the API's path", p))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.BasePath == "" {
		c.BasePath = DefaultBasePath
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ClientAddr == nil {
		c.ClientAddr = remoteAddr
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	return c
}

// validateBasePath accepts "/" or "/seg(/seg)*" of printable ASCII without "?" or "#":
// the path is compared byte-wise after ASCII folding, so nothing else could match.
func validateBasePath(p string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return fmt.Errorf("proxy: BasePath %q must be \"/\" or start with / and not end with one", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '?' || c == '#' || c == '%' {
			return fmt.Errorf("proxy: BasePath %q may hold only printable ASCII other than ?, # and %%", p)
		}
	}
	return nil
}

func apiPath(base string) string {
	if base == "/" {
		return ResourcePath
	}
	return base + ResourcePath
}

// server is the http.Handler that New returns.
type server struct {
	cfg     Config
	apiPath string
	// basePrefix is the base path as a prefix of other paths: "" for "/".
	basePrefix string
	// decisionsPath is the decisions API's path (decisions.go).
	decisionsPath string
	metrics       *metrics
	inFlight      atomic.Int64 // requests between ServeHTTP's start and their log line
}

// New returns the API's http.Handler. Every path it does not serve is answered 404
// in the error shape, so it can be the server's only handler.
func New(cfg Config) (http.Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &server{
		cfg:           cfg,
		apiPath:       apiPath(cfg.BasePath),
		basePrefix:    strings.TrimSuffix(cfg.BasePath, "/"),
		decisionsPath: strings.TrimSuffix(cfg.BasePath, "/") + DecisionsPath,
		metrics:       newMetrics(),
	}, nil
}

// Route names that the request log uses instead of raw paths.
const (
	routeGroupMembers = "groupMembers"
	routeNotFound     = "notFound"
	routeDecisions    = "policyDecisions"
)

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	rec := &record{client: clip(s.cfg.ClientAddr(r), maxLoggedAddr)}
	// One recorder per request: the one around the API when telemetry serves it.
	sw := telemetry.RecordResponse(w)
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))
	s.inFlight.Add(1)
	defer func() {
		p := recover()
		s.logRequest(r, rec, sw, start, p)
		if s.inFlight.Add(-1) == 0 && s.cfg.Idle != nil {
			s.cfg.Idle()
		}
		if p != nil {
			panic(p)
		}
		if rec.aborted {
			// Writing nothing would make net/http answer 200 with an empty body if the
			// connection is still open; aborting closes it instead.
			panic(http.ErrAbortHandler)
		}
	}()

	path := RoutePath(r)
	if h, ok := s.cfg.Mounts[path]; ok {
		rec.route, rec.quiet = path, true
		h.ServeHTTP(sw, r)
		return
	}
	// One trailing slash names the same resource, as on the product's web server;
	// redirecting instead would turn a DELETE into a GET in some clients.
	if isAPIPath(path, s.apiPath) {
		rec.route = routeGroupMembers
		s.serveGroupMembers(sw, r, rec)
		return
	}
	if s.cfg.Decisions != nil && isAPIPath(path, s.decisionsPath) {
		rec.route = routeDecisions
		s.serveDecisions(sw, r, rec)
		return
	}
	if s.serveSignIn(sw, r, rec, path) {
		return
	}
	rec.route = routeNotFound
	Error(sw, r, dirgate.Errorf(dirgate.ENOTFOUND, "The requested resource does not exist."))
}

// APIRoute returns the API's route for basePath (as Config.BasePath spells it) and
// whether path is that route, matched exactly as the handler matches it. Telemetry
// around the handler names spans and metrics by it.
func APIRoute(basePath, path string) (string, bool) {
	if basePath == "" {
		basePath = DefaultBasePath
	}
	api := apiPath(basePath)
	return api, isAPIPath(path, api)
}

// isAPIPath: one trailing slash names the same resource, letters match in any case.
func isAPIPath(path, api string) bool {
	return asciiEqualFold(strings.TrimSuffix(path, "/"), api)
}

// asciiEqualFold is strings.EqualFold restricted to ASCII letters: Unicode folding
// would let "ſ" (U+017F) stand for "s" in a path or in "falſe".
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func hasPathPrefixFold(p, prefix string) bool {
	if len(p) < len(prefix) || !asciiEqualFold(p[:len(prefix)], prefix) {
		return false
	}
	return len(p) == len(prefix) || p[len(prefix)] == '/'
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
