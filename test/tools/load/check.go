package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/dirgate/dirgate"
)

// maxVariants bounds the distinct byte forms of one correct listing remembered per
// state. dirgate's encoding is deterministic, so one is expected; more only cost a
// JSON comparison each time.
const maxVariants = 4

// Checker holds the expected answers of a workload and compares answers with them.
//
// A listing is compared as JSON values, object by object in order (the documented
// order: DN without regard to case, then GUID), properties included, never by bytes
// alone: a different but equivalent encoding is right, a different listing is wrong.
// Because decoding a 1,000-object listing costs milliseconds, which the load
// generator would take from the server on a 2-core machine, a body found right is
// remembered and an identical body later is accepted after a byte comparison.
type Checker struct {
	mu       sync.RWMutex
	want     map[string][]any           // op key -> expected listing as JSON values
	derived  map[string][]any           // op key + state -> the listing without the removed member
	accepted map[string][][]byte        // op key + state -> bodies found equal
	dns      map[string]map[string]bool // query -> lower-case DNs of the unfiltered listing
	hidden   map[string]bool            // op key -> the caller is answered that the group is unknown
}

// NewChecker returns an empty checker.
func NewChecker() *Checker {
	return &Checker{want: map[string][]any{}, derived: map[string][]any{}, accepted: map[string][][]byte{},
		dns: map[string]map[string]bool{}, hidden: map[string]bool{}}
}

// SetListing records the listing a caller must get for a query.
func (c *Checker) SetListing(caller int, q Query, objs []dirgate.Object) error {
	if objs == nil {
		objs = []dirgate.Object{}
	}
	b, err := json.Marshal(objs)
	if err != nil {
		return fmt.Errorf("checker: encode expected listing: %w", err)
	}
	var v []any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("checker: decode expected listing: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want[listingKey(caller, q)] = v
	return nil
}

// SetHidden records that a caller must be answered for q as for an unknown group:
// its policy does not let it view the group (docs/api.md, "Objects the caller may
// not view").
func (c *Checker) SetHidden(caller int, q Query) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hidden[listingKey(caller, q)] = true
}

// WantStatus is the status a caller's listing of q must get: 404 for a group the
// caller may not view, 200 otherwise.
func (c *Checker) WantStatus(caller int, q Query) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.hidden[listingKey(caller, q)] {
		return 404
	}
	return 200
}

// CheckHidden returns "" when body is the error answer about an unknown group, and
// otherwise says what differs.
func CheckHidden(body []byte) string {
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Sprintf("body is not the error shape: %v (%.80q)", err, body)
	}
	if e.Code != "notFound" || e.Message != "The group was not found." {
		return fmt.Sprintf("answered %q %q, want the unknown group's notFound", e.Code, e.Message)
	}
	return ""
}

// SetDNs records the DNs of a query's unfiltered listing: what a direct directory
// search must find.
func (c *Checker) SetDNs(q Query, dns []string) {
	set := make(map[string]bool, len(dns))
	for _, dn := range dns {
		set[strings.ToLower(dn)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dns[dnsKey(q)] = set
}

// HasListing reports whether an expected answer is recorded for caller and q.
func (c *Checker) HasListing(caller int, q Query) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.want[listingKey(caller, q)]
	return ok || c.hidden[listingKey(caller, q)]
}

func listingKey(caller int, q Query) string { return fmt.Sprintf("%d\x00%s", caller, q.RawQuery()) }

// dnsKey leaves out what a directory search does not apply (the size limit is the
// gateway's).
func dnsKey(q Query) string {
	q.SizeLimit = 0
	return q.RawQuery()
}

// CheckListing returns "" when body is the listing caller must get for q in one of
// the given member states ("" = every member present, otherwise the DN key of the
// one member removed), and otherwise says what differs.
func (c *Checker) CheckListing(caller int, q Query, states []string, body []byte) string {
	key := listingKey(caller, q)
	if len(states) == 0 {
		states = []string{""}
	}
	c.mu.RLock()
	for _, st := range states {
		for _, ok := range c.accepted[key+"\x01"+st] {
			if bytes.Equal(ok, body) {
				c.mu.RUnlock()
				return ""
			}
		}
	}
	c.mu.RUnlock()

	var got []any
	if err := json.Unmarshal(body, &got); err != nil {
		return fmt.Sprintf("body is not a JSON array: %v (%.80q)", err, body)
	}
	var firstDiff string
	for _, st := range states {
		want, err := c.expected(key, st)
		if err != "" {
			return err
		}
		d := diff(got, want)
		if d == "" {
			c.remember(key+"\x01"+st, body)
			return ""
		}
		if firstDiff == "" {
			firstDiff = d
		}
	}
	if len(states) > 1 {
		return fmt.Sprintf("matches none of %d acceptable states; against the first: %s", len(states), firstDiff)
	}
	return firstDiff
}

// expected returns the listing for key in state st.
func (c *Checker) expected(key, st string) ([]any, string) {
	c.mu.RLock()
	want, ok := c.want[key]
	d, dok := c.derived[key+"\x01"+st]
	c.mu.RUnlock()
	if !ok {
		return nil, "no expected listing for " + strings.ReplaceAll(key, "\x00", " ")
	}
	if st == "" {
		return want, ""
	}
	if dok {
		return d, ""
	}
	d = []any{}
	for _, o := range want {
		if m, _ := o.(map[string]any); m != nil {
			if dn, _ := m["dn"].(string); dnKey(dn) == st {
				continue
			}
		}
		d = append(d, o)
	}
	c.mu.Lock()
	c.derived[key+"\x01"+st] = d
	c.mu.Unlock()
	return d, ""
}

func (c *Checker) remember(key string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.accepted[key]) < maxVariants {
		c.accepted[key] = append(c.accepted[key], bytes.Clone(body))
	}
}

// diff describes the first difference between two listings as JSON values, "" when
// they are equal.
func diff(got, want []any) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Sprintf("object %d is %s, want %s (%d objects, want %d)", i, describe(got[i]), describe(want[i]), len(got), len(want))
		}
	}
	switch {
	case len(got) > len(want):
		return fmt.Sprintf("%d objects, want %d; first extra: %s", len(got), len(want), describe(got[len(want)]))
	case len(got) < len(want):
		return fmt.Sprintf("%d objects, want %d; first missing: %s", len(got), len(want), describe(want[len(got)]))
	}
	return ""
}

// describe names an object of a listing by its DN and, when that is not what
// differs, shows it whole (bounded).
func describe(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		b = append(b[:300:300], "..."...)
	}
	return string(b)
}

// CheckDNs returns "" when dns are exactly the DNs of q's unfiltered listing.
func (c *Checker) CheckDNs(q Query, dns []string) string {
	c.mu.RLock()
	want, ok := c.dns[dnsKey(q)]
	c.mu.RUnlock()
	if !ok {
		return "no expected DNs for " + q.RawQuery()
	}
	seen := make(map[string]bool, len(dns))
	for _, dn := range dns {
		k := strings.ToLower(dn)
		if !want[k] {
			return fmt.Sprintf("%d entries, want %d; unexpected %s", len(dns), len(want), dn)
		}
		if seen[k] {
			return fmt.Sprintf("%s found twice", dn)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		return fmt.Sprintf("%d entries, want %d", len(seen), len(want))
	}
	return ""
}

// dnKey normalises a DN as directories compare them; a DN that does not parse keys
// as itself in lower case (it can only come from a wrong answer).
func dnKey(dn string) string {
	d, err := dirgate.ParseDN(dn)
	if err != nil {
		return strings.ToLower(dn)
	}
	return d.Key()
}
