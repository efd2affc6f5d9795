package proxy

import "time"

// blocked reports whether addr has used up its failures of tokens and session ids
// and, if so, how long until the oldest one leaves the window.
func (t *throttle) blocked(addr string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blockedIn(t.clients, addr, now)
}

// fail is failJudged's hold alone.
func (t *throttle) fail(addr string, now time.Time) time.Duration {
	hold, _, _ := t.failJudged(addr, now)
	return hold
}

// reserve is reservePair under the throttle's lock.
func (t *throttle) reserve(key string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reservePair(key, now)
}
