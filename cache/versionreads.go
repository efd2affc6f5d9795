package cache

import (
	"strings"
	"sync"
)

// versionReads lets concurrent requests share the read of the same version tokens,
// without weakening what each request's read proves. The guarantee (docs/cache.md)
// needs every request to see tokens read after it arrived: a removal answered before
// the request was sent has written its new token by then. So a request never uses a
// read already sent when it arrives; it joins the next one, which is sent once the
// read in flight has finished. At most one read per set of keys is in flight and one
// gathers requests, so under load N concurrent hits of one listing cost about two
// reads instead of N, and an idle one costs what it did: its own read, at once.
type versionReads struct {
	mu        sync.Mutex
	gathering map[string]*versionRead // not sent yet: requests may join
	inFlight  map[string]*versionRead // sent: too early for requests arriving now
}

type versionRead struct {
	done chan struct{}
	vals []string
	err  error
}

// get returns the values of keys read by read, in a read sent after the call began.
// read is called by one of the requests sharing it, with that request's context.
func (v *versionReads) get(keys []string, read func() ([]string, error)) ([]string, error) {
	k := strings.Join(keys, "\x00")
	v.mu.Lock()
	if r := v.gathering[k]; r != nil {
		v.mu.Unlock()
		<-r.done
		return r.vals, r.err
	}
	if v.gathering == nil {
		v.gathering, v.inFlight = map[string]*versionRead{}, map[string]*versionRead{}
	}
	r := &versionRead{done: make(chan struct{})}
	v.gathering[k] = r
	prev := v.inFlight[k]
	v.mu.Unlock()
	if prev != nil {
		// Sent before this request arrived: its answer proves nothing to it. Others
		// join r meanwhile. A read is bounded by the store's timeout.
		<-prev.done
	}
	v.mu.Lock()
	delete(v.gathering, k)
	v.inFlight[k] = r
	v.mu.Unlock()
	r.vals, r.err = read()
	v.mu.Lock()
	if v.inFlight[k] == r {
		delete(v.inFlight, k)
	}
	v.mu.Unlock()
	close(r.done)
	return r.vals, r.err
}
