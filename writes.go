package dirgate

import "time"

// MembershipWrite is a change of one membership made through dirgate, remembered for
// a while so that a listing read from another domain controller, which may not have
// received it yet by replication, does not contradict it (docs/directory.md,
// "Several domain controllers").
type MembershipWrite struct {
	// Group and Member are GUIDs in canonical form.
	Group  string `json:"group"`
	Member string `json:"member"`
	// Added is true for an addition, false for a removal.
	Added bool `json:"added"`
	// Server names the DC that took the write (its URL, as configured or discovered).
	Server string `json:"server"`
	// At is when the write succeeded.
	At time.Time `json:"at"`
	// Origin and USN stamp the write as the DC that took it numbers its changes: its
	// invocation ID and the group's uSNChanged read right after the write. Another DC
	// holds the write once its up-to-dateness vector reaches USN for Origin. Empty
	// and 0 when the stamp could not be read.
	Origin string `json:"origin,omitempty"`
	USN    int64  `json:"usn,omitempty"`
}

// MaxMembershipWrites bounds the writes remembered per group: a bulk change larger
// than this through dirgate within the remembered window keeps only the latest.
const MaxMembershipWrites = 4096
