package history

import "time"

// Config sets what the checker assumes of a run.
type Config struct {
	// Initial is each group's direct members (lower-cased DNs) when the run began.
	Initial map[string][]string
	// Staleness is S: a listing must reflect every direct change that completed S
	// or more before it started, counted from the end of the last DC fault.
	Staleness time.Duration
	// Converge is how long two writes to one membership made on different DCs
	// may still be ordered by AD's replication rather than by their real time.
	Converge time.Duration
	// DisableBound is how soon a disabled account's token must stop working.
	DisableBound time.Duration
	// Settle is how long after a fault heals availability is not yet required.
	Settle time.Duration
}

// Anomaly is one breach of a promise.
type Anomaly struct {
	Kind   string  `json:"kind"`   // "stale-read", "lost-write", "resurrection", "phantom", "revoked-token-accepted", "disabled-token-accepted", "unavailable", "bad-failure"
	Op     int64   `json:"op"`     // the operation that saw it
	Causes []int64 `json:"causes"` // the writes, revocations or faults it contradicts
	Detail string  `json:"detail"`
}

// Report is the checker's judgement of a history.
type Report struct {
	Anomalies []Anomaly      `json:"anomalies"`
	Checks    map[string]int `json:"checks"` // how many times each rule was applied
	Ops       map[string]int `json:"ops"`    // operations by kind
	Faults    int            `json:"faults"`
	// Staleness of direct changes: how long after a change completed listings still
	// missed it, in all and outside DC faults.
	Staleness     Distribution `json:"staleness"`
	StalenessCalm Distribution `json:"stalenessCalm"`
}

// Distribution summarises durations.
type Distribution struct {
	N                  int           `json:"n"`
	P50, P90, P99, Max time.Duration `json:"-"`
}

// Check judges ops against the promises.
func Check(ops []Op, cfg Config) Report {
	return Report{}
}
