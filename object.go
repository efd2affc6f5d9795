package dirgate

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/dirgate/dirgate/internal/objectjson"
)

// Directory types (docs/compatibility.md, "Objects as the product renders them").
const (
	DirectoryTypeNone            = 0
	DirectoryTypeActiveDirectory = 1
	DirectoryTypeCloud           = 2
)

// Object types. Their codes (objectTypeCode) follow from an entry's objectClass
// (internal/ldapentry/entry.go): the product fixes organizationalUnit 0, user 2,
// group 3 and computer 4; the others are dirgate's choice (docs/compatibility.md,
// "objectType and objectTypeCode").
const (
	TypeOrganizationalUnit = "organizationalUnit"
	TypeContainer          = "container"
	TypeUser               = "user"
	TypeGroup              = "group"
	TypeComputer           = "computer"
	TypeContact            = "contact"
	TypeForeignPrincipal   = "foreignSecurityPrincipal"
	TypeDomain             = "domainDNS"
)

// Object is a directory object exactly as a client receives it
// (docs/compatibility.md, "Directory objects"). SID and PrimaryGroupID are kept for
// identifier resolution and membership, never rendered.
type Object struct {
	GUID           string              `json:"guid"`
	DN             string              `json:"dn"`
	DisplayName    string              `json:"displayName"`
	ObjectType     string              `json:"objectType"`
	ObjectTypeCode int                 `json:"objectTypeCode"`
	DomainName     string              `json:"domainName"`
	DirectoryType  int                 `json:"directoryType"`
	Properties     map[string][]string `json:"properties"`
	AccountStatus  *AccountStatus      `json:"accountStatus,omitempty"`
	PasswordStatus *PasswordStatus     `json:"passwordStatus,omitempty"`

	SID            string `json:"-"`
	PrimaryGroupID int    `json:"-"` // RID of the object's primary group, 0 if none
	// Unresolved marks an object listed as the directory holds it in place of an
	// object of another directory that could not be asked (a foreign security
	// principal, or a member held by DN within one forest, whose domain failed:
	// upstream/domains). It is answered as it is,
	// but a listing that holds it is not cached (cache/fill.go), so that the next
	// request asks that directory again. Never encoded, never cached.
	Unresolved bool `json:"-"`
}

// CountUnresolved counts the objects of objs marked Unresolved.
func CountUnresolved(objs []Object) int {
	n := 0
	for i := range objs {
		if objs[i].Unresolved {
			n++
		}
	}
	return n
}

// IsGroup reports whether members can be listed under o.
func (o *Object) IsGroup() bool { return o.ObjectType == TypeGroup }

// MarshalJSON renders properties as {} rather than null when none were requested
// (AppendJSON).
func (o Object) MarshalJSON() ([]byte, error) { return o.AppendJSON(nil), nil }

// AppendJSON appends o's JSON encoding to dst: byte for byte what encoding/json gave
// through MarshalJSON before (TestObjectAppendJSON, FuzzObjectAppendJSON), HTML
// escaping included, without reflection (internal/objectjson encodes the values).
// A cache records each object's encoding once (cache/codec.go) and the renderer
// encodes those a filter altered (render/join.go).
func (o *Object) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"guid":`...)
	dst = objectjson.AppendString(dst, o.GUID)
	dst = append(dst, `,"dn":`...)
	dst = objectjson.AppendString(dst, o.DN)
	dst = append(dst, `,"displayName":`...)
	dst = objectjson.AppendString(dst, o.DisplayName)
	dst = append(dst, `,"objectType":`...)
	dst = objectjson.AppendString(dst, o.ObjectType)
	dst = append(dst, `,"objectTypeCode":`...)
	dst = strconv.AppendInt(dst, int64(o.ObjectTypeCode), 10)
	dst = append(dst, `,"domainName":`...)
	dst = objectjson.AppendString(dst, o.DomainName)
	dst = append(dst, `,"directoryType":`...)
	dst = strconv.AppendInt(dst, int64(o.DirectoryType), 10)
	dst = append(dst, `,"properties":`...)
	dst = objectjson.AppendProperties(dst, o.Properties)
	if a := o.AccountStatus; a != nil {
		dst = append(dst, `,"accountStatus":{"isDisabled":`...)
		dst = strconv.AppendBool(dst, a.IsDisabled)
		dst = append(dst, `,"isLocked":`...)
		dst = strconv.AppendBool(dst, a.IsLocked)
		dst = append(dst, `,"expirationDate":`...)
		dst = a.ExpirationDate.appendJSON(dst)
		dst = append(dst, '}')
	}
	if p := o.PasswordStatus; p != nil {
		dst = append(dst, `,"passwordStatus":{"whenChanged":`...)
		dst = p.WhenChanged.appendJSON(dst)
		dst = append(dst, `,"expirationStatus":`...)
		dst = strconv.AppendInt(dst, int64(p.ExpirationStatus), 10)
		dst = append(dst, `,"expirationDate":`...)
		dst = p.ExpirationDate.appendJSON(dst)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// AccountStatus is rendered on users and computers.
type AccountStatus struct {
	IsDisabled     bool       `json:"isDisabled"`
	IsLocked       bool       `json:"isLocked"`
	ExpirationDate *Timestamp `json:"expirationDate"`
}

// PasswordStatus is rendered on users and computers. WhenChanged is pwdLastSet;
// ExpirationDate is msDS-UserPasswordExpiryTimeComputed (null when the password never
// expires or must be changed at next logon); ExpirationStatus is one of the
// PasswordExpiration* values.
type PasswordStatus struct {
	WhenChanged      *Timestamp `json:"whenChanged"`
	ExpirationStatus int        `json:"expirationStatus"`
	ExpirationDate   *Timestamp `json:"expirationDate"`
}

// Password expiration statuses. The product has shown 0 and 1 without their meaning
// (docs/compatibility.md, "Objects as the product renders them"); dirgate uses 0 for
// a password that is usable and 1 for one that has expired or must be changed at next
// logon.
const (
	PasswordNotExpired = 0
	PasswordExpired    = 1
)

// Timestamp renders as ISO 8601 UTC with all seven fractional digits of a FILETIME,
// as the product renders them (docs/compatibility.md, "Objects as the product renders
// them"): 2020-07-14T16:27:49.5590448Z.
type Timestamp struct{ time.Time }

// TimestampLayout is the layout of every top-level timestamp and FILETIME property.
const TimestampLayout = "2006-01-02T15:04:05.0000000Z"

// NewTimestamp returns a pointer to t as a Timestamp, for the optional fields above.
func NewTimestamp(t time.Time) *Timestamp { return &Timestamp{t.UTC()} }

func (t Timestamp) String() string { return t.UTC().Format(TimestampLayout) }

func (t Timestamp) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(TimestampLayout)+2)), nil
}

// appendJSON appends t as MarshalJSON renders it, null for nil.
func (t *Timestamp) appendJSON(dst []byte) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	return objectjson.AppendTimestamp(dst, t.Time)
}

func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v.UTC()
	return nil
}
