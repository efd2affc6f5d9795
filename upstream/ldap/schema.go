package ldap

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dirgate/dirgate"
	goldap "github.com/go-ldap/ldap/v3"
)

// SchemaRefreshInterval is how old the confidential attributes read from the schema
// may grow before a listing that asks for properties has them read again (in the
// background; that listing and the next use the set already read).
const SchemaRefreshInterval = 10 * time.Minute

// confidentialFilter finds the attributeSchema objects whose searchFlags has
// CONFIDENTIAL (0x80, MS-ADTS 3.1.1.2.3) set, with the bitwise-AND matching rule.
const confidentialFilter = "(&(objectClass=attributeSchema)(searchFlags:1.2.840.113556.1.4.803:=128))"

// schemaState is what the adapter knows of the schema's confidential attributes.
type schemaState struct {
	nc           string // the schema naming context, from the rootDSE
	confidential atomic.Pointer[map[string]bool]
	readAt       atomic.Int64 // unix nanoseconds of the last successful read
	refreshing   atomic.Bool
	lastErr      atomic.Pointer[string]
}

var _ dirgate.ConfidentialSchema = (*Directory)(nil)

// ConfidentialAttributes returns the lower-cased lDAPDisplayNames of the attributes
// the schema marks confidential, read at Open. When the set is older than
// SchemaRefreshInterval, it starts reading it again in the background and returns
// the set it has; a read that fails keeps the set (SchemaError reports it).
func (d *Directory) ConfidentialAttributes() map[string]bool {
	m := d.schema.confidential.Load()
	if m == nil {
		return nil
	}
	if d.now().UnixNano()-d.schema.readAt.Load() > int64(SchemaRefreshInterval) && d.schema.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer d.schema.refreshing.Store(false)
			if d.closed.Load() {
				return
			}
			if err := d.readConfidential(context.Background()); err != nil {
				s := err.Error()
				d.schema.lastErr.Store(&s)
			} else {
				d.schema.lastErr.Store(nil)
			}
		}()
	}
	return *m
}

// SchemaError is why the last attempt to read the confidential attributes again
// failed ("" when it did not): the set read before stays in force.
func (d *Directory) SchemaError() string {
	if s := d.schema.lastErr.Load(); s != nil {
		return *s
	}
	return ""
}

// readConfidential reads the confidential attributes of the schema naming context
// (its attributeSchema objects are its direct children).
func (d *Directory) readConfidential(ctx context.Context) error {
	if d.schema.nc == "" {
		return fmt.Errorf("ldap: the rootDSE names no schemaNamingContext")
	}
	var names map[string]bool
	err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
		names = map[string]bool{}
		return search(ctx, c, query{
			base: d.schema.nc, scope: goldap.ScopeSingleLevel, filter: confidentialFilter,
			attrs: []string{"lDAPDisplayName"}, pageSize: d.cfg.PageSize,
		}, func(e *goldap.Entry) error {
			if n := e.GetAttributeValue("lDAPDisplayName"); n != "" {
				names[strings.ToLower(n)] = true
			}
			return nil
		})
	})
	if err != nil {
		return wrap("read the schema's confidential attributes", err)
	}
	d.schema.confidential.Store(&names)
	d.schema.readAt.Store(d.now().UnixNano())
	return nil
}
