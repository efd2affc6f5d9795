package dirgate

import "time"

// Throttled is a throttle's judgement of one authentication event (docs/auth.md,
// "Throttling"): how long to hold its answer and, when a bound refuses it, which
// bound and how long until it would not. The throttle (throttle/) judges; the HTTP
// layer (proxy/) holds the answer and renders the 429.
type Throttled struct {
	// Hold is how long to hold the answer: failures are answered later and later.
	Hold time.Duration
	// Refused is the bound that refuses the request (429), NotThrottled if none.
	Refused ThrottleBound
	// RetryAfter is, when Refused, how long until the bound lets the request through.
	RetryAfter time.Duration
}

// ThrottleBound names the bound behind a refusal: the HTTP layer words its answer
// by it.
type ThrottleBound int

// The throttle's bounds.
const (
	NotThrottled ThrottleBound = iota
	// ThrottledAddress: the address's rejected tokens or session ids fill its window.
	ThrottledAddress
	// ThrottledAccount: the address's password checks of one account name fill theirs.
	ThrottledAccount
	// ThrottledAddressSignIns: the address's password checks, whatever the names,
	// fill its budget.
	ThrottledAddressSignIns
	// ThrottledInProgress: too many password checks are in progress, from the
	// address or from all together.
	ThrottledInProgress
)

// IsRefusal tells a judged and refused attempt (a wrong password, an unknown
// session id) from an error that judged nothing (the directory down). The throttle
// holds only refusals' answers; the HTTP layer counts only refused session ids.
func IsRefusal(err error) bool {
	code := ErrorCode(err)
	return code == EFORBIDDEN || code == EUNAUTHENTICATED
}
