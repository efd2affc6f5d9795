package ldap

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dirgate/dirgate/internal/ldapentry"
	goldap "github.com/go-ldap/ldap/v3"
)

// OIDs of the Active Directory controls and matching rule the adapter uses.
const (
	oidASQ     = "1.2.840.113556.1.4.1504" // Attribute Scoped Query (MS-ADTS 3.1.1.3.4.1.18)
	oidInChain = "1.2.840.113556.1.4.1941" // LDAP_MATCHING_RULE_IN_CHAIN
)

// query is one logical search; paged searches are sent as many requests.
type query struct {
	base     string
	scope    int
	filter   string
	attrs    []string
	controls []goldap.Control
	// pageSize > 0 adds the paged-results control. AD answers a non-paged search
	// matching more than MaxPageSize (1000) objects with the first 1000 and code 4
	// (docs/directory.md, "Paging and size limits"), so every search that can match
	// many objects is paged.
	pageSize int
}

// search runs q on c and calls fn with each entry, following the paging cookie.
// Continuation references (a subtree search from the domain root returns one for
// the configuration partition) are not errors and are skipped.
func search(ctx context.Context, c conn, q query, fn func(*goldap.Entry) error) error {
	ctx, cancel := context.WithCancel(ctx) // stops go-ldap's reader goroutine on early return
	defer cancel()
	req := &goldap.SearchRequest{
		BaseDN: q.base, Scope: q.scope, DerefAliases: goldap.NeverDerefAliases,
		Filter: q.filter, Attributes: q.attrs, Controls: q.controls,
	}
	var paging *goldap.ControlPaging
	if q.pageSize > 0 {
		paging = goldap.NewControlPaging(uint32(q.pageSize))
		req.Controls = append(append([]goldap.Control(nil), q.controls...), paging)
	}
	for {
		resp := c.SearchAsync(ctx, req, 64)
		var cookie []byte
		sawDone := false
		for resp.Next() {
			if e := resp.Entry(); e != nil {
				if err := fn(e); err != nil {
					return err
				}
				continue
			}
			if resp.Referral() != "" {
				continue
			}
			if ctrl := goldap.FindControl(resp.Controls(), goldap.ControlTypePaging); ctrl != nil {
				sawDone = true
				if pc, ok := ctrl.(*goldap.ControlPaging); ok {
					cookie = pc.Cookie
				}
			}
		}
		if err := resp.Err(); err != nil {
			return err
		}
		// SearchAsync reports neither cancellation nor a connection that was already
		// closed: both end the stream silently.
		if err := ctx.Err(); err != nil {
			return err
		}
		if !sawDone && c.IsClosing() {
			return errConnClosed
		}
		if paging == nil || len(cookie) == 0 {
			return nil
		}
		paging.SetCookie(cookie)
	}
}

// pendingRange is an attribute the server returned only in part.
type pendingRange struct {
	attr string // the attribute name without the range option
	next int    // the first value index still missing
}

// convert turns a go-ldap entry into an ldapentry.Entry and lists the attributes whose
// values came back ranged and incomplete. The entry keeps go-ldap's value slices
// (nothing else holds or changes them) rather than copies, and takes the lower-case
// names from names: a DC writes the same few names in every entry, and lower-casing
// and copying each (Entry.Add) was 8.5% of a large group's read in a CPU profile of
// BenchmarkLargeDCMembers, and 19 of its 203 allocations a member.
func convert(e *goldap.Entry, names lowerNames) (*ldapentry.Entry, []pendingRange, error) {
	out := &ldapentry.Entry{DN: e.DN, Attrs: make(map[string][][]byte, len(e.Attributes))}
	var pending []pendingRange
	for _, a := range e.Attributes {
		r, ranged, err := parseRange(a.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", e.DN, err)
		}
		name := a.Name
		if ranged {
			name = r.attr
			if !r.last {
				pending = append(pending, pendingRange{attr: r.attr, next: r.high + 1})
			}
		}
		// As Entry.Add: values appended under the lower-case name, which is present
		// (nil) even when no value came.
		k := names.lower(name)
		if prev, ok := out.Attrs[k]; ok || len(a.ByteValues) == 0 {
			out.Attrs[k] = append(prev, a.ByteValues...)
		} else {
			out.Attrs[k] = slices.Clip(a.ByteValues) // appending later copies
		}
	}
	return out, pending, nil
}

// lowerNames remembers the lower-case form of the attribute names of one read's
// entries, at most maxLowerNames of them (the names come from the server).
type lowerNames map[string]string

const maxLowerNames = 64

func (n lowerNames) lower(name string) string {
	if l, ok := n[name]; ok {
		return l
	}
	l := strings.ToLower(name)
	if len(n) < maxLowerNames {
		n[name] = l
	}
	return l
}

// maxRangeRounds bounds range retrieval: 10,000 rounds of AD's 1,500 values is far
// beyond AD's 5 million values per attribute that no real group reaches; a server
// that never says "*" cannot keep the adapter looping.
const maxRangeRounds = 10000

// completeRange fetches the rest of a ranged attribute: AD returns at most
// MaxValRange (1500) values of a large attribute as "member;range=0-1499" and an
// empty "member"; each further request names "member;range=<next>-*" until the
// answer's range ends in "*". Samba returns every value unless asked for a range
// (docs/directory.md, "Range retrieval"). controls are those of the first request,
// sent again with each.
func completeRange(ctx context.Context, c conn, out *ldapentry.Entry, p pendingRange, controls ...goldap.Control) error {
	next := p.next
	for round := 0; ; round++ {
		if round == maxRangeRounds {
			return fmt.Errorf("range retrieval of %s on %q: no end after %d rounds", p.attr, out.DN, round)
		}
		var got *rangeOption
		var vals [][]byte
		err := search(ctx, c, query{
			base: out.DN, scope: goldap.ScopeBaseObject, filter: "(objectClass=*)",
			attrs:    []string{p.attr + ";range=" + strconv.Itoa(next) + "-*"},
			controls: controls,
		}, func(e *goldap.Entry) error {
			for _, a := range e.Attributes {
				r, ranged, err := parseRange(a.Name)
				if err != nil {
					return err
				}
				if ranged && strings.EqualFold(r.attr, p.attr) {
					got, vals = &r, a.ByteValues
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("range retrieval of %s on %q: %w", p.attr, out.DN, err)
		}
		if got == nil {
			return fmt.Errorf("range retrieval of %s on %q: no values from %d", p.attr, out.DN, next)
		}
		if got.low != next {
			return fmt.Errorf("range retrieval of %s on %q: asked from %d, got %d", p.attr, out.DN, next, got.low)
		}
		out.Add(p.attr, vals...)
		if got.last {
			return nil
		}
		next = got.high + 1
	}
}

// rangeOption is a parsed "attr;range=low-high" attribute description.
type rangeOption struct {
	attr      string // the description without the range option
	low, high int
	last      bool // high was "*": these are the last values
}

// maxRangeIndex keeps value indexes far from integer overflow; AD caps an attribute
// at a few million values.
const maxRangeIndex = 1<<31 - 1

// parseRange parses an attribute description the server returned. ranged is false
// for a description without a range option; err is set for a malformed one, which a
// server that follows MS-ADTS 3.1.1.3.1.3.3 never sends.
func parseRange(name string) (r rangeOption, ranged bool, err error) {
	parts := strings.Split(name, ";")
	kept := parts[:1]
	for _, opt := range parts[1:] {
		if len(opt) < 6 || !strings.EqualFold(opt[:6], "range=") {
			kept = append(kept, opt)
			continue
		}
		if ranged {
			return rangeOption{}, false, fmt.Errorf("attribute %q: two range options", name)
		}
		ranged = true
		lo, hi, ok := strings.Cut(opt[6:], "-")
		if !ok {
			return rangeOption{}, false, fmt.Errorf("attribute %q: range without '-'", name)
		}
		if r.low, err = rangeIndex(lo); err != nil {
			return rangeOption{}, false, fmt.Errorf("attribute %q: %w", name, err)
		}
		if hi == "*" {
			r.last = true
		} else {
			if r.high, err = rangeIndex(hi); err != nil {
				return rangeOption{}, false, fmt.Errorf("attribute %q: %w", name, err)
			}
			if r.high < r.low {
				return rangeOption{}, false, fmt.Errorf("attribute %q: range ends before it starts", name)
			}
		}
	}
	if kept[0] == "" {
		return rangeOption{}, false, fmt.Errorf("attribute %q: empty name", name)
	}
	r.attr = strings.Join(kept, ";")
	return r, ranged, nil
}

func rangeIndex(s string) (int, error) {
	if s == "" || len(s) > 10 {
		return 0, fmt.Errorf("bad range index %q", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("bad range index %q", s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > maxRangeIndex {
		return 0, fmt.Errorf("bad range index %q", s)
	}
	return int(v), nil
}

// escapeBytes renders binary data (a GUID or SID) as a filter value, every byte as
// \xx: EscapeFilter would leave bytes below 0x80 raw.
func escapeBytes(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 3*len(b))
	for _, x := range b {
		out = append(out, '\\', hex[x>>4], hex[x&0xf])
	}
	return string(out)
}

// asqControl asks the server to evaluate a base search against the objects named by
// attr's values instead of the base object: SEQUENCE { OCTET STRING attr } (the
// names used are constants shorter than 128 bytes, so lengths are one byte). It is
// critical: a server that ignored it would return the group itself.
func asqControl(attr string) goldap.Control {
	v := append([]byte{0x30, byte(len(attr) + 2), 0x04, byte(len(attr))}, attr...)
	return &goldap.ControlString{ControlType: oidASQ, Criticality: true, ControlValue: string(v)}
}
