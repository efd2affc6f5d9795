// Package history records what the chaos suite (test/suite/chaos) did and saw, one
// operation per JSON line, judges the whole record against the promises that
// docs/chaos.md ("What the checker checks") states (Check), and draws it (Plot).
//
// An operation has a start and an end on the suite's clock (one process, so one
// monotonic clock), and what its caller learned: an HTTP status, a listing's
// members, whether a write changed anything. A fault is an operation of its own,
// from the moment it is injected to the moment it is healed.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Kinds of operation.
const (
	// Through dirgate.
	List   = "list"    // GET groupMembers (Nested for includeIndirect=true)
	Remove = "remove"  // DELETE groupMembers
	Add    = "add"     // POST groupMembers
	SignIn = "sign-in" // create a session and exchange it for a token (Token set on success)
	Revoke = "revoke"  // DELETE …/auth?token=…: the token must never work again
	UseTok = "use"     // a request made with a signed-in token (Token), to see whether it works

	// Directly on a domain controller (DC says which), as its administrator.
	DirectRemove = "direct-remove" // a member value removed
	DirectAdd    = "direct-add"    // a member value added (a group nested when Member is a group)
	Disable      = "disable"       // an account disabled (Member: the account's DN)
	Enable       = "enable"        // and enabled again

	// The nemesis: Fault names what was done, Targets what it hits.
	Fault = "fault"
)

// Op is one operation and what came of it.
type Op struct {
	ID      int64  `json:"id"`
	Process string `json:"process"`           // the client that made it ("list-3", "nemesis")
	Kind    string `json:"kind"`              // one of the kinds above
	Replica string `json:"replica,omitempty"` // the dirgate replica it went to ("A", "B", …)
	DC      int    `json:"dc,omitempty"`      // direct changes: the DC written (1, 2)

	// Group and Member are lower-cased DNs. A listing has Group only.
	Group  string `json:"group,omitempty"`
	Member string `json:"member,omitempty"`
	Nested bool   `json:"nested,omitempty"`

	Start time.Time `json:"start"`
	End   time.Time `json:"end"` // zero while it runs, or if the suite stopped before it ended

	// What the caller learned. Status 0 with Err set: no HTTP answer (a refused
	// connection, a timeout). For direct changes Status is the LDAP result code
	// (0 done, 16 or 20: nothing to change) and Err its message.
	Status    int      `json:"status,omitempty"`
	Err       string   `json:"err,omitempty"`
	ErrorBody string   `json:"errorBody,omitempty"` // a failed request's body, cut to 512 bytes
	Members   []string `json:"members,omitempty"`   // a listing's member DNs, lower-cased
	NoChanges *bool    `json:"noChanges,omitempty"` // a write's answer: true when nothing changed
	Token     string   `json:"token,omitempty"`     // sign-in, revoke, use: a short name of the token, never the token
	Cache     string   `json:"cache,omitempty"`     // a listing's X-Dirgate-Cache

	// Faults.
	Fault   string   `json:"fault,omitempty"`   // "kill-dc", "blackhole-dc", "pause-inbound", "delay-dc", "kill-redis-primary", "stop-redis-replica", "kill-replica", "kill-feed-leader"
	Targets []string `json:"targets,omitempty"` // what it hits: "dc1", "dc2", "redis-primary", "redis-replica", "replica:A", …
}

// Done reports whether the operation ended.
func (o Op) Done() bool { return !o.End.IsZero() }

// OK reports whether a request through dirgate was answered with a 2xx status,
// or a direct change applied (LDAP result 0).
func (o Op) OK() bool {
	if o.Kind == DirectAdd || o.Kind == DirectRemove || o.Kind == Disable || o.Kind == Enable {
		return o.Done() && o.Err == "" && o.Status == 0
	}
	return o.Done() && o.Status >= 200 && o.Status < 300
}

// Write encodes ops as JSON lines.
func Write(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			return fmt.Errorf("history: write op %d: %w", o.ID, err)
		}
	}
	return nil
}

// Read decodes JSON lines written by Write.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var o Op
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", n, err)
		}
		ops = append(ops, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: read: %w", err)
	}
	return ops, nil
}
