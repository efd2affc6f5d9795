package ldap

import (
	"context"
	"strings"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// foreignChunk bounds the SIDs one search asks for: its filter grows by about 80
// bytes per SID.
const foreignChunk = 100

// ForeignChanges finds the foreign security principals this domain holds for sids
// (each a principal of another domain) and returns a change of each: its GUID, its
// SID and the groups that hold it directly, read from memberOf in extended form as
// the change feed reads them (changes.go). A router of several domains adds them to
// the changes the principals' own domain reported (dirgate.ForeignChangeSource).
//
// The search runs under BaseDN: an FSP outside it (BaseDN an OU) is never listed, so
// its groups need no invalidation. SIDs that are not SIDs are an EINVALID error.
func (d *Directory) ForeignChanges(ctx context.Context, sids []string) ([]dirgate.Change, error) {
	var out []dirgate.Change
	for len(sids) > 0 {
		n := min(len(sids), foreignChunk)
		var filter strings.Builder
		filter.WriteString("(&(objectClass=foreignSecurityPrincipal)(|")
		for _, s := range sids[:n] {
			raw, err := ldapentry.SIDToBytes(s)
			if err != nil {
				return nil, dirgate.WrapError(dirgate.EINVALID, codeMessages[dirgate.EINVALID], err)
			}
			filter.WriteString("(objectSid=" + escapeBytes(raw) + ")")
		}
		filter.WriteString("))")
		sids = sids[n:]
		var found []dirgate.Change
		err := d.do(ctx, true, func(ctx context.Context, c conn, _ int) error {
			found = found[:0]
			return search(ctx, c, query{
				base: d.cfg.BaseDN, scope: goldap.ScopeWholeSubtree, filter: filter.String(),
				attrs:    []string{"objectGUID", "objectClass", "objectSid", "memberOf"},
				controls: []goldap.Control{extendedDNString}, pageSize: d.cfg.PageSize,
			}, func(e *goldap.Entry) error {
				ch, err := d.parseChange(e)
				if err != nil {
					return err
				}
				found = append(found, ch.Change)
				return nil
			})
		})
		if err != nil {
			return nil, wrap("foreign security principals", err)
		}
		out = append(out, found...)
	}
	return out, nil
}
