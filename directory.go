package dirgate

import (
	"context"
	"sort"
	"strings"
)

// Directory is what every upstream implements: the primitive reads and the two writes
// that the member service composes into the API's semantics. Upstreams do not expand
// nested groups, deduplicate, order or filter: MemberService does that once for all.
type Directory interface {
	// Lookup returns the object named by id, with the requested extra properties.
	// An unknown object is an ENOTFOUND error; an identifier the directory rejects is
	// EINVALID.
	Lookup(ctx context.Context, id Identifier, props []string) (Object, error)
	// Members returns the direct members of group: the values of its member attribute
	// and the objects whose primaryGroupID is the group's RID, each once, in any order.
	// The slice is the caller's: MemberService filters and sorts it in place.
	Members(ctx context.Context, group Object, props []string) ([]Object, error)
	// MemberOf returns the groups obj is a direct member of, its primary group included.
	MemberOf(ctx context.Context, obj Object) ([]Object, error)
	// RemoveMember deletes member from group's member attribute. It returns an error
	// wrapping ErrNotMember when member is not a direct member, and ErrPrimaryGroup when
	// it belongs only through primaryGroupID.
	RemoveMember(ctx context.Context, group, member Object) error
	// AddMember adds member to group's member attribute. It returns an error wrapping
	// ErrAlreadyMember when member is a direct member already, or belongs through
	// primaryGroupID (the directory will not add it then).
	AddMember(ctx context.Context, group, member Object) error
}

// ForeignMemberAdder is implemented by a directory that adds a principal of another
// domain to one of its groups by the principal's SID, as AD and Samba do: the member
// written is the foreign security principal the directory holds for that SID, which
// the directory creates when it holds none (docs/directory.md, "Several domains:
// what the directory shows"). The router of several domains (upstream/domains)
// adds members of another configured domain through it.
type ForeignMemberAdder interface {
	// AddForeignMember adds the principal whose SID is sid, a SID of another domain
	// (S-1-5-21-…-RID), to group. As AD allows such a member only in a domain-local
	// group, an addition to any other group is refused with an EINVALID error, and so
	// is a SID that names an object of the directory that is no foreign security
	// principal; nothing is written then. It returns an error wrapping
	// ErrAlreadyMember when the group holds the principal already.
	AddForeignMember(ctx context.Context, group Object, sid Identifier) error
}

// ForestGroupFinder is implemented by a directory that can say which of its groups
// hold an object of another domain of its own forest. Within one forest AD stores
// such a member by its DN, not through a foreign security principal, and the
// object's own domain does not hold the back-link (its memberOf lacks the group)
// (docs/directory.md, "Several domains of one forest"). The router of several
// domains (upstream/domains) asks it for a caller's groups across the forest, and
// for the groups a change of another domain's object concerns.
type ForestGroupFinder interface {
	// GroupsHolding returns the groups of the directory that hold any of dns
	// directly as a member, each once, dns being DNs of objects that other domains
	// hold; none when no group does.
	GroupsHolding(ctx context.Context, dns []DN) ([]Object, error)
}

// RefusedAddition is the client message of an addition the directory refuses (AD's
// unwillingToPerform, or a rule of group scopes dirgate applies where Samba does
// not): it says neither which rule refused it nor what the directory holds
// (docs/compatibility.md, "Addition").
const RefusedAddition = "The directory refused to add this member to this group."

// ListOptions are a listing's parameters (docs/api.md, "GET parameters").
type ListOptions struct {
	IncludeIndirect bool
	// Properties are the extra properties to render, normalised by
	// NormalizeProperties: lower-case, sorted, each once.
	Properties []string
	// SizeLimit is the maximum number of objects returned; 0 means no limit.
	SizeLimit int
}

// Limits on the properties parameter.
const (
	MaxProperties         = 100
	MaxPropertyNameLength = 128
)

// NormalizeProperties validates LDAP attribute names (a letter then letters, digits
// and hyphens, or a numeric OID) and returns them lower-cased, sorted and
// deduplicated. Options such as ";range=" or ";binary" are refused: they would let a
// client change how the upstream reads the directory.
func NormalizeProperties(names []string) ([]string, error) {
	if len(names) > MaxProperties {
		return nil, Errorf(EINVALID, "names more than %d properties", MaxProperties)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n == "" {
			return nil, Errorf(EINVALID, "contains an empty property name")
		}
		if len(n) > MaxPropertyNameLength {
			return nil, Errorf(EINVALID, "contains a property name longer than %d characters", MaxPropertyNameLength)
		}
		if !IsAttributeName(n) {
			return nil, Errorf(EINVALID, "contains %q, which is not an LDAP attribute name", n)
		}
		out = append(out, strings.ToLower(n))
	}
	sort.Strings(out)
	j := 0
	for i, n := range out {
		if i == 0 || n != out[j-1] {
			out[j] = n
			j++
		}
	}
	return out[:j], nil
}

// IsAttributeName reports whether n is an LDAP attribute name as NormalizeProperties
// and ParseDN accept it: a letter then letters, digits and hyphens, or a numeric OID.
func IsAttributeName(n string) bool {
	if n == "" {
		return false
	}
	isLetter := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	if isLetter(n[0]) {
		for i := 1; i < len(n); i++ {
			if c := n[i]; !isLetter(c) && !isDigit(c) && c != '-' {
				return false
			}
		}
		return true
	}
	// numeric OID: numbers without leading zeros separated by single dots (RFC 4512
	// numericoid), so that "2.5.4.3" and "2.5.4.03" cannot both pass as names.
	for _, num := range strings.Split(n, ".") {
		if num == "" || (len(num) > 1 && num[0] == '0') {
			return false
		}
		for i := 0; i < len(num); i++ {
			if !isDigit(num[i]) {
				return false
			}
		}
	}
	return true
}

// OperationResult is the answer to a removal or an addition (docs/api.md, "Successful
// responses"; docs/compatibility.md, "Operation results").
type OperationResult struct {
	ResultType     int               `json:"resultType"`
	InnerMessages  []InnerMessage    `json:"innerMessages"`
	Exception      *OperationError   `json:"exception"`
	ActualObjectDN string            `json:"actualObjectDN"`
	NoChanges      bool              `json:"noChanges"`
	ExtraInfo      map[string]string `json:"extraInfo"`
}

// Result types (docs/compatibility.md, "Operation results").
const (
	ResultSucceeded = 0
	ResultFailed    = 1
	ResultSuspended = 2
)

// InnerMessage is an element of OperationResult.InnerMessages (docs/compatibility.md,
// "Operation results").
type InnerMessage struct {
	Source        *string        `json:"source"`
	Text          string         `json:"text"`
	MessageType   int            `json:"messageType"`
	InnerMessages []InnerMessage `json:"innerMessages"`
}

// OperationError is OperationResult.Exception.
type OperationError struct {
	Message string `json:"message"`
}

// GroupRef names a group a principal belongs to.
type GroupRef struct {
	DN   string `json:"dn"`
	GUID string `json:"guid"`
	SID  string `json:"sid"`
}

// Principal is the authenticated caller: the directory object behind its token and
// every group it belongs to, transitively (policies decide on them). AccountStatus
// is the object's own, as resolved (users and computers; nil for any other object):
// an authenticator refuses a token whose account it makes unusable
// (AccountStatus.Refusal). DomainName is the DNS name of its domain, taken from its
// DN as an object's is (DN.DomainName): "" when the DN has no DC components.
type Principal struct {
	DN            string         `json:"dn"`
	GUID          string         `json:"guid"`
	SID           string         `json:"sid"`
	DisplayName   string         `json:"displayName"`
	DomainName    string         `json:"domainName"`
	Groups        []GroupRef     `json:"groups"`
	AccountStatus *AccountStatus `json:"accountStatus,omitempty"`
}

// Authenticator turns the Adm-Authorization token into a principal. An unknown token
// is an EUNAUTHENTICATED error.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}
