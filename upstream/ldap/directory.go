package ldap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
	"go.opentelemetry.io/otel/metric"
)

// Directory is the LDAP adapter. It is safe for concurrent use.
type Directory struct {
	cfg  Config
	base dirgate.DN
	now  func() time.Time

	// srv is the list of servers in order of preference (servers.go); srvMu
	// serialises its replacement after DNS discovery.
	srv   atomic.Pointer[[]*server]
	srvMu sync.Mutex
	// newServer builds a server for a target (Open's dialers; tests' fakes).
	newServer func(target) *server
	// bg ends with Close: the background checks and probes run under it.
	bg         context.Context
	stopBg     context.CancelFunc
	rediscover chan struct{}
	closed     atomic.Bool

	// Recent membership writes, laid over listings from other DCs (overlay.go).
	local    writes
	overlaid atomic.Int64 // members a listing gained or lost by the overlay
	// invocations are the DCs' invocation IDs, for the overlay's stamps (replstate.go).
	invocations invocations
	// netbios is the domain's NetBIOS name, read at the first sign-in (signin.go).
	netbios atomic.Pointer[string]
	// refusals times wrong-password refusals, so that an unknown name's takes as
	// long (refusaltime.go).
	refusals refusalTimes

	// Learnt from the server at Open.
	domainSID string // objectSid of the domain naming context: primary groups live there
	domainNC  string // the domain naming context, whose head holds replUpToDateVector
	// otherNCs are the naming contexts whose DNs lie below BaseDN but that are not the
	// domain (CN=Configuration,DC=…, DC=DomainDnsZones,DC=…): a subtree search
	// from the domain does not enter them, so neither does the adapter's scope.
	otherNCs []dirgate.DN
	// forestNCs are the naming contexts of the forest's other domains, from its
	// crossRef objects (forest.go).
	forestNCs []dirgate.DN
	asq       bool // the server supports Attribute Scoped Query
	// pageASQ adds paging to ASQ searches. Samba 4.17 returns every result without it
	// and takes about half as long again with it (docs/directory.md, "Attribute
	// scoped query (ASQ)"), so it starts off on Samba and turns on for good the first
	// time a server answers sizeLimitExceeded or adminLimitExceeded (as AD does
	// beyond MaxPageSize, and newer Samba may).
	pageASQ atomic.Bool

	metrics metric.Registration // the pool's gauges, removed at Close

	changes changeState // what ReadChanges learnt (changes.go)
	schema  schemaState // the schema's confidential and DN-valued attributes (schema.go)
}

var _ dirgate.Directory = (*Directory)(nil)

// newDirectory returns a Directory over the servers newServer builds for targets,
// without background checks (start starts them).
func newDirectory(cfg Config, base dirgate.DN, targets []target, newServer func(target) *server) *Directory {
	d := &Directory{cfg: cfg, base: base, now: time.Now, newServer: newServer, rediscover: make(chan struct{}, 1)}
	d.setTargets(targets)
	d.metrics = registerMetrics(d)
	return d
}

// start runs the background health checks (and DNS discovery) until Close.
func (d *Directory) start() {
	d.bg, d.stopBg = context.WithCancel(context.Background())
	go d.watch(d.bg)
}

// Close stops the background checks and closes the pooled connections; calls still
// running finish first.
func (d *Directory) Close() {
	if !d.closed.CompareAndSwap(false, true) {
		return
	}
	if d.stopBg != nil {
		d.stopBg()
	}
	if d.metrics != nil {
		d.metrics.Unregister()
	}
	for _, s := range d.servers() {
		s.pool.close()
		if c, ok := s.brk.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// baseAttrs are what ldapentry.Entry.ToObject reads.
var baseAttrs = []string{
	"objectGUID", "objectSid", "objectClass", "userAccountControl",
	"msDS-User-Account-Control-Computed", "accountExpires", "pwdLastSet",
	"msDS-UserPasswordExpiryTimeComputed", "primaryGroupID",
}

// attributes returns baseAttrs plus the requested properties, each once. The names
// become part of the search request, so they are checked again here although the
// member service normalises them: a name with an option such as ";range=" would
// change what the server returns.
func attributes(props []string) ([]string, error) {
	if _, err := dirgate.NormalizeProperties(props); err != nil {
		return nil, err
	}
	out := append([]string(nil), baseAttrs...)
next:
	for _, p := range props {
		for _, a := range out {
			if strings.EqualFold(a, p) {
				continue next
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// discover reads the rootDSE (controls, domain naming context, vendor) and the
// domain SID, and checks that BaseDN lies in the domain.
func (d *Directory) discover(ctx context.Context) error {
	var controls, ncs []string
	var nc, vendor, schemaNC, configNC string
	var sid []byte
	var forest []dirgate.DN
	var forestErr error
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		err := search(ctx, c, query{
			base: "", scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
			attrs: []string{"supportedControl", "defaultNamingContext", "namingContexts", "vendorName", "schemaNamingContext",
				"configurationNamingContext"},
		}, func(e *goldap.Entry) error {
			controls, ncs = e.GetAttributeValues("supportedControl"), e.GetAttributeValues("namingContexts")
			nc, vendor = e.GetAttributeValue("defaultNamingContext"), e.GetAttributeValue("vendorName")
			schemaNC = e.GetAttributeValue("schemaNamingContext")
			configNC = e.GetAttributeValue("configurationNamingContext")
			return nil
		})
		if err != nil || nc == "" {
			return err
		}
		err = search(ctx, c, query{
			base: nc, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)", attrs: []string{"objectSid"},
		}, func(e *goldap.Entry) error {
			sid = e.GetRawAttributeValue("objectSid")
			return nil
		})
		if err != nil {
			return err
		}
		if own, perr := dirgate.ParseDN(nc); perr == nil {
			forest, forestErr = readForest(ctx, c, configNC, own)
			if forestErr != nil && !serverAnswered(forestErr) && !errors.Is(forestErr, errBadCrossRef) {
				return forestErr // the connection failed: the next attempt reads it
			}
		}
		return nil
	})
	if err != nil {
		return wrap("read rootDSE", err)
	}
	ncDN, err := dirgate.ParseDN(nc)
	if err != nil {
		return fmt.Errorf("ldap: rootDSE defaultNamingContext %q: %w", nc, err)
	}
	if !d.base.EqualFold(ncDN) && !d.base.IsDescendantOf(ncDN) {
		return fmt.Errorf("ldap: BaseDN %q is outside the server's domain %q", d.base, nc)
	}
	for _, s := range ncs {
		if p, err := dirgate.ParseDN(s); err == nil && !p.EqualFold(ncDN) && (p.EqualFold(d.base) || p.IsDescendantOf(d.base)) {
			d.otherNCs = append(d.otherNCs, p)
		}
	}
	if forestErr != nil {
		d.cfg.log().WarnContext(ctx, "ldap: the forest's other domains could not be read: members they hold are not listed",
			"domain", nc, "err", forestErr)
	}
	d.forestNCs = forest // nil when forestErr
	for _, p := range forest {
		// A child domain lies below its parent's base DN but is not the parent's.
		if p.IsDescendantOf(d.base) {
			d.otherNCs = append(d.otherNCs, p)
		}
	}
	d.domainNC = nc
	if d.domainSID, err = ldapentry.SIDFromBytes(sid); err != nil {
		return fmt.Errorf("ldap: objectSid of %q: %w", nc, err)
	}
	for _, c := range controls {
		d.asq = d.asq || c == oidASQ
	}
	d.pageASQ.Store(!strings.Contains(strings.ToLower(vendor), "samba"))
	// The property policy withholds confidential and DN-valued attributes
	// (docs/policy.md): a gateway that cannot tell which they are does not start.
	d.schema.nc = schemaNC
	return d.readSchema(ctx)
}

// do runs f on a pooled connection of one server after another until one answers
// (attempt.go): f runs again, whole, on the next attempt, so it resets what it
// gathers. The attempts are never concurrent. A request that ends by its context
// discards the connection: it may still carry the abandoned request. retry false
// makes one attempt only. Errors come back raw, for the caller to interpret and wrap.
func (d *Directory) do(ctx context.Context, retry bool, f func(ctx context.Context, c conn, attempt int) error) error {
	_, err := run(ctx, d, false, retry, func(ctx context.Context, c conn, n int) (struct{}, error) {
		return struct{}{}, f(ctx, c, n)
	})
	return err
}

// serverAnswered reports whether err is a result the server sent (codes below
// go-ldap's client-side 200): such an answer stands even if the connection closed
// right after it, and must not be retried.
func serverAnswered(err error) bool {
	rc, ok := resultCode(err)
	return ok && rc < goldap.ErrorNetwork
}

// collector gathers the entries of one read; finish turns them into objects.
type collector struct {
	entries []*ldapentry.Entry
	pending [][]pendingRange
	names   lowerNames
}

func (col *collector) add(e *goldap.Entry) error {
	if col.names == nil {
		col.names = lowerNames{}
	}
	de, p, err := convert(e, col.names)
	if err != nil {
		return err
	}
	col.entries = append(col.entries, de)
	col.pending = append(col.pending, p)
	return nil
}

// finish completes ranged attributes, renders the objects and drops those outside
// BaseDN.
func (d *Directory) finish(ctx context.Context, c conn, col *collector, props []string) ([]dirgate.Object, error) {
	now := d.now()
	out := make([]dirgate.Object, 0, len(col.entries))
	for i, e := range col.entries {
		for _, p := range col.pending[i] {
			if err := completeRange(ctx, c, e, p); err != nil {
				return nil, err
			}
		}
		o, err := e.ToObject(props, now)
		if err != nil {
			return nil, err
		}
		if d.inScope(o.DN) {
			out = append(out, o)
		}
	}
	return out, nil
}

// read runs one logical read with retry and returns its objects.
//
// Reads are hedged: a server silent for AttemptTimeout is joined by the next one,
// and the first to answer wins (attempt.go).
func (d *Directory) read(ctx context.Context, props []string, search func(context.Context, conn, func(*goldap.Entry) error) error) ([]dirgate.Object, error) {
	objs, _, err := d.readServed(ctx, props, search)
	return objs, err
}

// readServed is read, also naming the server whose answer it is.
func (d *Directory) readServed(ctx context.Context, props []string, search func(context.Context, conn, func(*goldap.Entry) error) error) ([]dirgate.Object, string, error) {
	type served struct {
		objs   []dirgate.Object
		server string
	}
	r, err := run(ctx, d, true, true, func(ctx context.Context, c conn, _ int) (served, error) {
		col := &collector{}
		if err := search(ctx, c, col.add); err != nil {
			return served{}, err
		}
		objs, err := d.finish(ctx, c, col, props)
		return served{objs, servedBy(ctx)}, err
	})
	return r.objs, r.server, err
}

// inScope reports whether dn is BaseDN or below it, outside the other naming
// contexts.
func (d *Directory) inScope(dn string) bool {
	// Most DNs a DC returns are plain: decided without parsing (a large group's
	// first listing checks every member).
	if in, ok := ldapentry.ContainsPlain(d.base, dn); ok && !in {
		return false
	} else if ok && d.outsideOtherNCsPlain(dn) {
		return true
	}
	p, err := dirgate.ParseDN(dn)
	if err != nil {
		return false
	}
	return d.inScopeDN(p)
}

// outsideOtherNCsPlain reports whether the plain DN dn lies in none of the other
// naming contexts under the base; false when any of them needs the parser to say.
func (d *Directory) outsideOtherNCsPlain(dn string) bool {
	for _, nc := range d.otherNCs {
		if in, ok := ldapentry.ContainsPlain(nc, dn); !ok || in {
			return false
		}
	}
	return true
}

func (d *Directory) inScopeDN(p dirgate.DN) bool {
	if !p.EqualFold(d.base) && !p.IsDescendantOf(d.base) {
		return false
	}
	for _, nc := range d.otherNCs {
		if p.EqualFold(nc) || p.IsDescendantOf(nc) {
			return false
		}
	}
	return true
}

// domainRID returns the RID of a SID in the directory's domain; builtin and
// well-known SIDs (S-1-5-32-544, S-1-5-11) have none and are nobody's primary group.
func (d *Directory) domainRID(sid string) (int, bool) {
	rest, ok := strings.CutPrefix(sid, d.domainSID+"-")
	if !ok || d.domainSID == "" || strings.Contains(rest, "-") {
		return 0, false
	}
	return ldapentry.RID(sid)
}
