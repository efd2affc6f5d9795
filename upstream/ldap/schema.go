package ldap

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/adattr"
	goldap "github.com/go-ldap/ldap/v3"
)

// SchemaRefreshInterval is how old the attributes read from the schema may grow
// before a listing that asks for properties has them read again (in the
// background; that listing and the next use the set already read).
const SchemaRefreshInterval = 10 * time.Minute

// schemaFilter finds the attributeSchema objects the property policy's "*" leaves
// out (docs/policy.md): those whose searchFlags has CONFIDENTIAL (0x80, MS-ADTS
// 3.1.1.2.3) set, with the bitwise-AND matching rule, and those whose values name
// objects: attributeSyntax 2.5.5.1 (DN), 2.5.5.7 (DN-Binary and OR-Name) and
// 2.5.5.14 (DN-String and Access-Point), the syntaxes of MS-ADTS 3.1.1.2.2.2 that
// hold an object reference; 2.5.5.17 (SID: mS-DS-CreatorSID, tokenGroups, …) and
// 2.5.5.15 (NT-Sec-Desc: a security descriptor's owner and trustees are SIDs, as
// in msDS-AllowedToActOnBehalfOfOtherIdentity). One search finds them all.
const schemaFilter = "(&(objectClass=attributeSchema)(|(searchFlags:1.2.840.113556.1.4.803:=128)" +
	"(attributeSyntax=2.5.5.1)(attributeSyntax=2.5.5.7)(attributeSyntax=2.5.5.14)" +
	"(attributeSyntax=2.5.5.17)(attributeSyntax=2.5.5.15)))"

// flagConfidential is searchFlags' CONFIDENTIAL bit.
const flagConfidential = 0x80

// namingSyntaxes are the attributeSyntax values of schemaFilter whose values name
// objects.
var namingSyntaxes = map[string]bool{"2.5.5.1": true, "2.5.5.7": true, "2.5.5.14": true, "2.5.5.17": true, "2.5.5.15": true}

// schemaSets is one read of the schema: the confidential attributes, those naming
// objects (DN-valued, SIDs, security descriptors) "*" leaves out, and their union,
// lower-cased lDAPDisplayNames.
type schemaSets struct {
	confidential, dn, namedOnly map[string]bool
}

// schemaState is what the adapter knows of the schema.
type schemaState struct {
	nc         string // the schema naming context, from the rootDSE
	sets       atomic.Pointer[schemaSets]
	readAt     atomic.Int64 // unix nanoseconds of the last successful read
	refreshing atomic.Bool
	lastErr    atomic.Pointer[string]
}

var _ dirgate.PropertySchema = (*Directory)(nil)

// NamedOnlyProperties returns the lower-cased lDAPDisplayNames of the attributes
// the schema marks confidential or whose values name objects (but for
// adattr.DNPropertyCovered), read at Open: the property policy returns them only
// to a caller whose policy names them. When the set is older than
// SchemaRefreshInterval, it starts reading it again in the background and returns
// the set it has; a read that fails keeps the set (SchemaError reports it).
func (d *Directory) NamedOnlyProperties() map[string]bool { return d.schemaSets().namedOnly }

// ConfidentialAttributes returns the part of NamedOnlyProperties that the schema
// marks confidential.
func (d *Directory) ConfidentialAttributes() map[string]bool { return d.schemaSets().confidential }

// DNAttributes returns the part of NamedOnlyProperties whose values name objects:
// DNs, SIDs and security descriptors.
func (d *Directory) DNAttributes() map[string]bool { return d.schemaSets().dn }

func (d *Directory) schemaSets() schemaSets {
	m := d.schema.sets.Load()
	if m == nil {
		return schemaSets{}
	}
	if d.now().UnixNano()-d.schema.readAt.Load() > int64(SchemaRefreshInterval) && d.schema.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer d.schema.refreshing.Store(false)
			if d.closed.Load() {
				return
			}
			if err := d.readSchema(context.Background()); err != nil {
				s := err.Error()
				d.schema.lastErr.Store(&s)
			} else {
				d.schema.lastErr.Store(nil)
			}
		}()
	}
	return *m
}

// SchemaError is why the last attempt to read the schema again failed ("" when it
// did not): the sets read before stay in force.
func (d *Directory) SchemaError() string {
	if s := d.schema.lastErr.Load(); s != nil {
		return *s
	}
	return ""
}

// readSchema reads the confidential attributes and those naming objects of the
// schema naming context (its attributeSchema objects are its direct children) in
// one search.
func (d *Directory) readSchema(ctx context.Context) error {
	if d.schema.nc == "" {
		return fmt.Errorf("ldap: the rootDSE names no schemaNamingContext")
	}
	var sets schemaSets
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		sets = schemaSets{confidential: map[string]bool{}, dn: map[string]bool{}, namedOnly: map[string]bool{}}
		return search(ctx, c, query{
			base: d.schema.nc, scope: goldap.ScopeSingleLevel, filter: schemaFilter,
			attrs: []string{"lDAPDisplayName", "searchFlags", "attributeSyntax"}, pageSize: d.cfg.PageSize,
		}, func(e *goldap.Entry) error {
			n := strings.ToLower(e.GetAttributeValue("lDAPDisplayName"))
			if n == "" {
				return nil
			}
			// The filter matched: the server found the bit set or the syntax one
			// naming objects. A searchFlags the adapter cannot read on an attribute
			// of another syntax counts as confidential.
			isDN := namingSyntaxes[e.GetAttributeValue("attributeSyntax")]
			flags, err := strconv.ParseInt(e.GetAttributeValue("searchFlags"), 10, 64)
			if err == nil && flags&flagConfidential != 0 || err != nil && !isDN {
				sets.confidential[n], sets.namedOnly[n] = true, true
			}
			if isDN && !adattr.DNPropertyCovered(n) {
				sets.dn[n], sets.namedOnly[n] = true, true
			}
			return nil
		})
	})
	if err != nil {
		return wrap("read the schema's confidential attributes and those naming objects", err)
	}
	d.schema.sets.Store(&sets)
	d.schema.readAt.Store(d.now().UnixNano())
	return nil
}
