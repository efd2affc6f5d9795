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
}

// MaxMembershipWrites bounds the writes remembered per group: a bulk change larger
// than this through dirgate within the remembered window keeps only the latest.
const MaxMembershipWrites = 4096
