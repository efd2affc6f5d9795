package load

import (
	"sync"
	"sync/atomic"
)

// RemovalGroup is a group whose members the workload removes through the gateway and
// adds back through the gateway (POST). Its members must be plain members (no nested
// groups, no primary-group members), so that removing one takes exactly that object
// out of every listing of the group.
type RemovalGroup struct {
	Group   string   // DN
	Members []string // DNs of the members cycled, all present at the start
}

// removals tracks what each removal group's listing may show, so that a listing is
// checked against the state the group was in while the listing was being served.
//
// The states of a group, for the member m being cycled:
//
//   - before any removal: every member present, and nothing else is right;
//   - while DELETE m is in flight: present or m absent (the removal may land before
//     the answer);
//   - after DELETE m was answered 200: m absent, and nothing else is right. This is
//     dirgate's guarantee (docs/cache.md): a removal made through dirgate is never
//     followed by a listing that still shows the member;
//   - while POST m (the addition that puts it back) is in flight: m absent or present;
//   - after POST m was answered 200: every member present, and nothing else is right:
//     the same guarantee for additions.
//
// A listing is right if it matches a state the group was in at any moment between
// the request being sent and its answer being read: each change of state takes a
// sequence number, and a listing accepts every state from the one in force when it
// started to the last one begun before it ended.
type removals struct {
	seq    atomic.Uint64
	mu     sync.Mutex
	groups []*removalState
	byKey  map[string]*removalState
}

type removalState struct {
	RemovalGroup
	key  string
	busy bool // a worker is cycling one of its members
	next int  // index of the next member to cycle
	// epochs are the group's states, oldest first: from seq on, the listing may be
	// in any of states ("" every member present, else the removed member's DN key).
	epochs []epoch
}

type epoch struct {
	seq    uint64
	states []string
}

func newRemovals(groups []RemovalGroup) *removals {
	r := &removals{byKey: map[string]*removalState{}}
	for _, g := range groups {
		s := &removalState{RemovalGroup: g, key: dnKey(g.Group), epochs: []epoch{{0, []string{""}}}}
		r.groups = append(r.groups, s)
		r.byKey[s.key] = s
	}
	return r
}

// now is the sequence number a listing takes before it is sent and after its answer
// was read.
func (r *removals) now() uint64 { return r.seq.Load() }

// statesOf returns the states a listing of group may show if it was sent at from and
// read at to; nil when group is not a removal group.
func (r *removals) statesOf(group string, from, to uint64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byKey[dnKey(group)]
	if s == nil {
		return nil
	}
	var out []string
	for i, e := range s.epochs {
		last := i == len(s.epochs)-1
		if e.seq > to || (!last && s.epochs[i+1].seq <= from) {
			continue // began after the answer was read, or ended before the request was sent
		}
		for _, st := range e.states {
			if !contains(out, st) {
				out = append(out, st)
			}
		}
	}
	return out
}

// set starts a new state of the group.
func (r *removals) set(s *removalState, states ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.epochs = append(s.epochs, epoch{r.seq.Add(1), states})
}

// acquire reserves a group that no other worker is cycling and chooses the member
// to remove; ok is false when every group is busy.
func (r *removals) acquire() (s *removalState, member string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.groups {
		if !s.busy && len(s.Members) > 0 {
			s.busy = true
			m := s.Members[s.next%len(s.Members)]
			s.next++
			return s, m, true
		}
	}
	return nil, "", false
}

func (r *removals) release(s *removalState) {
	r.mu.Lock()
	s.busy = false
	r.mu.Unlock()
}

// current returns the states in force now.
func (r *removals) current(s *removalState) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), s.epochs[len(s.epochs)-1].states...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
