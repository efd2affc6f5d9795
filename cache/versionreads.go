package cache

import (
	"errors"
	"sync"
)

var errShortRead = errors.New("cache: a version read returned fewer values than keys")

// versionReads lets concurrent requests share the reads of version tokens, without
// weakening what each request's read proves. The guarantee (docs/cache.md) needs
// every request that reads tokens (leases off, or an entry no lease vouches for) to
// see tokens read after it arrived: a removal answered before the
// request was sent has written its new token by then. So a request never uses a
// read already sent when it arrives; it joins the batch that will be sent next, once
// the read in flight has finished, adding its keys to it. At most one read is in
// flight and one batch gathers requests, whatever groups they ask about: under load
// N concurrent hits cost about two reads (one MGET of the union of their keys)
// instead of N, also when they list different groups, and an idle request costs what
// it did: its own read, at once.
type versionReads struct {
	mu        sync.Mutex
	gathering *versionBatch // not sent yet: requests join it
	inFlight  chan struct{} // closed when the read in flight ends; nil when none is
}

type versionBatch struct {
	keys  []string
	index map[string]int // position of each key in keys
	done  chan struct{}
	vals  []string
	err   error
}

// get returns the values of keys from a read sent after the call began. read reads
// the values of the keys it is given (the union of a batch's); it is called by the
// first request of a batch, with that request's context.
func (v *versionReads) get(keys []string, read func(keys []string) ([]string, error)) ([]string, error) {
	v.mu.Lock()
	b, lead := v.gathering, false
	if b == nil {
		b = &versionBatch{index: make(map[string]int, len(keys)), done: make(chan struct{})}
		v.gathering, lead = b, true
	}
	for _, k := range keys {
		if _, ok := b.index[k]; !ok {
			b.index[k] = len(b.keys)
			b.keys = append(b.keys, k)
		}
	}
	v.mu.Unlock()
	if lead {
		v.send(b, read)
	}
	<-b.done
	if b.err != nil {
		return nil, b.err
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = b.vals[b.index[k]]
	}
	return out, nil
}

// send waits for the read in flight, which was sent before some of b's requests
// arrived and so proves nothing to them, then closes b to newcomers and reads its
// keys. A read is bounded by the store's timeout.
func (v *versionReads) send(b *versionBatch, read func(keys []string) ([]string, error)) {
	v.mu.Lock()
	for v.inFlight != nil {
		prev := v.inFlight
		v.mu.Unlock()
		<-prev
		v.mu.Lock()
	}
	done := make(chan struct{})
	v.inFlight = done
	v.gathering = nil // later requests gather the next batch
	keys := b.keys
	v.mu.Unlock()

	vals, err := read(keys)
	if err == nil && len(vals) != len(keys) {
		err = errShortRead
	}
	b.vals, b.err = vals, err

	v.mu.Lock()
	v.inFlight = nil
	v.mu.Unlock()
	close(done)
	close(b.done)
}
