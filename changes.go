package dirgate

import (
	"context"
	"time"
)

// ChangeSource is implemented by upstreams that can say what changed in the directory
// since a position, so that caches follow changes made by anything but dirgate (the
// LDAP upstream polls uSNChanged; the memory upstream watches its file). The cache's
// change feed calls it about once a second (docs/cache.md).
type ChangeSource interface {
	// ReadChanges returns the changes committed after pos and the position to read
	// from next. At most max changes are returned: a larger burst, like any position
	// that cannot be trusted, comes back as a batch with Resync set and no changes.
	ReadChanges(ctx context.Context, pos ChangePosition, max int) (ChangeBatch, error)
}

// ChangePosition is where a change feed stands. It is opaque to the cache, which
// stores it so that another instance can continue from it.
type ChangePosition struct {
	// Source names the server and its database (for AD: the DC's dsServiceName and
	// invocationId). A position read from another source cannot be continued; a
	// mark kept for the source that answers can (Marks).
	Source string `json:"source"`
	// USN is the last update sequence number read (highestCommittedUSN at the read).
	USN uint64 `json:"usn"`
	// Time is when the position was read.
	Time time.Time `json:"time"`
	// Marks are the positions last read from other sources, most recent last, so
	// that a feed that returns to one of them continues from where it stood there
	// instead of resyncing (the LDAP upstream follows one DC at a time, and USNs are
	// per DC). At most MaxChangeMarks are kept, the oldest dropped
	// (upstream/ldap/marks.go).
	Marks []ChangeMark `json:"marks,omitempty"`
	// Follow are where the feed stands on each source it follows besides the one
	// it reads from (the LDAP upstream follows every DC it may read listings from,
	// upstream/ldap/follow.go). Unlike a mark, a follow mark never becomes the
	// position. At most MaxChangeMarks are kept.
	Follow []ChangeMark `json:"follow,omitempty"`
}

// ChangeMark is where a change feed stood on another source: its fields mean what
// ChangePosition's do.
type ChangeMark struct {
	Source string    `json:"source"`
	USN    uint64    `json:"usn"`
	Time   time.Time `json:"time"`
}

// MaxChangeMarks bounds ChangePosition.Marks, and ChangePosition.Follow.
const MaxChangeMarks = 16

// ChangeKind is what happened to an object.
type ChangeKind string

// Change kinds.
const (
	// ChangeGroup: a group was created or changed (its members, its name, anything).
	ChangeGroup ChangeKind = "group"
	// ChangeObject: any other object was created or changed in any attribute.
	ChangeObject ChangeKind = "object"
	// ChangeDeleted: an object was deleted (its tombstone was read).
	ChangeDeleted ChangeKind = "deleted"
)

// Change is one object that changed.
type Change struct {
	Kind ChangeKind
	// GUID is the object's GUID in canonical form.
	GUID string
	// Groups are the GUIDs of the groups the object is a direct member of, its
	// primary group included. GroupsKnown is false when they cannot be known (a
	// deleted object has lost its links; an object in more groups than one read
	// returns): then every listing may contain it.
	Groups      []string
	GroupsKnown bool
	// SID is the object's SID (S-1-5-21-…), "" when it has none (an OU, a contact)
	// or its source does not read it. A router of several domains finds by it the
	// groups of other domains that hold the object through a foreign security
	// principal (ForeignChangeSource).
	SID string
	// DN is the object's DN, "" when its source does not read it. Within one forest
	// AD holds a member of another domain by its DN, and the member's own domain
	// does not know those groups (its memberOf lacks them): a router of several
	// domains finds them by it (ForestGroupFinder).
	DN string
}

// Resync reasons: why a position could not be trusted.
const (
	ResyncNoPosition    = "no_position"    // nothing stored: the first start, or the store lost it
	ResyncServerChanged = "server_changed" // another DC answers behind the address
	ResyncRestored      = "restored"       // the DC's database was restored (new invocationId)
	ResyncUSNBackwards  = "usn_backwards"  // the DC's USN went below the position
	ResyncGap           = "gap"            // the position is older than the tombstone lifetime
	ResyncBurst         = "burst"          // more changes than one batch may hold
	ResyncUnparseable   = "unparseable"    // an entry the feed cannot read
	ResyncReloaded      = "reloaded"       // the memory upstream reloaded its file
	ResyncForced        = "forced"         // an operator asked for it
	ResyncForeignMissed = "foreign_missed" // another domain could not be asked which of its groups hold changed objects, too long
)

// ChangeBatch is the answer to one ReadChanges.
type ChangeBatch struct {
	// Position is where the next read continues.
	Position ChangePosition
	Changes  []Change
	// Resync, when set, is why everything cached must be invalidated: the changes
	// since the last position are not known.
	Resync string
	// Detail explains a resync for the log (never a value a client sent).
	Detail string
}

// ChangeCoverage is implemented by change sources that may not see every change (the
// LDAP upstream sees deletions only if its account may read deleted objects). It
// returns what the source cannot see, nil when it sees everything.
type ChangeCoverage interface {
	ChangeCoverage(ctx context.Context) error
}

// ForeignChangeSource is implemented by directories that hold foreign security
// principals (the LDAP upstream): a group of one domain holds a principal of another
// domain through one. A listing of such a group shows the principal as its own
// domain holds it, yet records only the group's token; so a change of the principal,
// read from its own domain's changes, must also invalidate the groups that hold its
// foreign security principals in the other domains (upstream/domains).
type ForeignChangeSource interface {
	// ForeignChanges returns, for each of sids that the directory holds as a foreign
	// security principal, a change of that principal: its GUID, its SID and the
	// groups that hold it directly (GroupsKnown false when they cannot all be read).
	// SIDs it holds no principal for are left out.
	ForeignChanges(ctx context.Context, sids []string) ([]Change, error)
}
