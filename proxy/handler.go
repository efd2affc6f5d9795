package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dirgate/dirgate"
)

// allowedMethods is the Allow header of a 405. HEAD is not offered: it would cost a
// full listing to send no body. OPTIONS is not offered either: there are no browser
// clients to pre-flight.
const allowedMethods = "GET, POST, DELETE"

// serveGroupMembers serves the resource in the order: method (405), authentication
// (429, 401), body (415, 413, 400), query (400), then the service.
func (s *server) serveGroupMembers(w http.ResponseWriter, r *http.Request, rec *record) {
	// Whatever the answer, net/http reads an unread body (up to 256 KiB) before it
	// sends it, to keep the connection: bound that, and the handler's own reading, so
	// that a client trickling a body cannot hold the request open. Only a request
	// with a body needs it (a cached listing has none). A writer that cannot set
	// deadlines (a test recorder) just reads without one. (The connection's clock is
	// the real one, whatever Config.Now says.)
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodDelete && r.Method != http.MethodPost {
		w.Header().Set("Allow", allowedMethods)
		Error(w, r, dirgate.Errorf(dirgate.EMETHOD, "The method is not allowed on this resource; use GET, POST or DELETE."))
		return
	}
	p, err := s.authenticate(w, r, rec)
	if err != nil {
		Error(w, r, err)
		return
	}
	rec.subject = p.DN
	switch {
	case r.Method == http.MethodPost:
		s.add(w, r, rec, p)
	// docs/api.md, "Request body": no body must be sent. A chunked body has
	// ContentLength -1.
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		Error(w, r, dirgate.Errorf(dirgate.EINVALID, "The request must not have a body."))
	case r.Method == http.MethodGet:
		s.list(w, r, rec, p)
	default:
		s.remove(w, r, rec, p)
	}
}

func (s *server) list(w http.ResponseWriter, r *http.Request, rec *record, p dirgate.Principal) {
	q, err := parseListQuery(r.URL.RawQuery)
	if err != nil {
		Error(w, r, err)
		return
	}
	rec.group = q.Group.Canonical()
	body, st, err := s.listBody(r.Context(), p, q)
	if err != nil {
		Error(w, r, err)
		return
	}
	if st != "" {
		rec.cache = string(st)
		w.Header()[CacheHeader] = cacheHeaderValue(st)
	}
	if u, ok := body.(unresolvedBody); ok && u.Unresolved() > 0 {
		w.Header().Set(UnresolvedHeader, strconv.Itoa(u.Unresolved()))
	}
	writeListing(w, r, body)
}

// UnresolvedHeader counts the objects a listing shows in place of objects of
// another domain that could not be asked (their domain failed): the foreign
// security principals the group's domain holds (docs/api.md). Absent when none.
const UnresolvedHeader = "X-Dirgate-Unresolved"

// unresolvedBody is a body that says how many of the objects it shows stand for
// objects that could not be asked (dirgate.Object.Unresolved): render.Lister's
// bodies, and those listBody renders itself.
type unresolvedBody interface {
	Unresolved() int
}

// Body is a listing's rendered response: its JSON, and forms of it (the compressed
// codings) made once each and kept beside it. It is an alias of an unnamed interface
// type, so that a renderer declaring the same methods the same way (render.Response)
// returns the very same type without either package importing the other.
type Body = interface {
	JSON() []byte
	Variant(name string, make func(json []byte) []byte) []byte
}

// BodyLister answers listings with rendered bodies, sharing them between requests,
// and says how each listing was served (render.Lister, wired by cmd/dirgate).
type BodyLister interface {
	ListBody(ctx context.Context, p dirgate.Principal, group dirgate.Identifier, opts dirgate.ListOptions) (Body, dirgate.CacheStatus, error)
}

func (s *server) listBody(ctx context.Context, p dirgate.Principal, q listQuery) (Body, dirgate.CacheStatus, error) {
	if s.cfg.Bodies != nil {
		body, st, err := s.cfg.Bodies.ListBody(ctx, p, q.Group, q.Options)
		if err != nil {
			return nil, "", fmt.Errorf("list group members: %w", err)
		}
		return body, st, nil
	}
	objs, err := s.cfg.Service.List(ctx, p, q.Group, q.Options)
	if err != nil {
		return nil, "", fmt.Errorf("list group members: %w", err)
	}
	if objs == nil {
		objs = []dirgate.Object{} // "[]", never "null", for an empty listing
	}
	b, err := json.Marshal(objs)
	if err != nil {
		return nil, "", dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("encode response: %w", err))
	}
	if n := dirgate.CountUnresolved(objs); n > 0 {
		return partialBody{plainBody(b), n}, "", nil
	}
	return plainBody(b), "", nil
}

// partialBody is a plainBody showing n unresolved objects.
type partialBody struct {
	plainBody
	n int
}

func (b partialBody) Unresolved() int { return b.n }

// plainBody is a body rendered for one request: its variants are made each time
// they are asked for.
type plainBody []byte

func (b plainBody) JSON() []byte { return b }

func (b plainBody) Variant(_ string, make func(json []byte) []byte) []byte { return make(b) }

// CacheHeader tells how a listing was served: hit, miss, stale or bypass
// (dirgate.CacheStatus). It is absent when no cache is configured.
const CacheHeader = "X-Dirgate-Cache"

func (s *server) remove(w http.ResponseWriter, r *http.Request, rec *record, p dirgate.Principal) {
	q, err := parseRemoveQuery(r.URL.RawQuery)
	if err != nil {
		Error(w, r, err)
		return
	}
	rec.group, rec.member = q.Group.Canonical(), q.Member.Canonical()
	res, err := s.cfg.Service.Remove(r.Context(), p, q.Group, q.Member)
	if err != nil {
		Error(w, r, fmt.Errorf("remove group member: %w", err))
		return
	}
	writeOK(w, r, res)
}

// add serves POST (docs/compatibility.md, "Adding a member"): the body names the
// group and the new member; the query string takes no parameters but must be validly
// encoded.
func (s *server) add(w http.ResponseWriter, r *http.Request, rec *record, p dirgate.Principal) {
	b, err := readJSONBody(r)
	if err != nil {
		Error(w, r, err)
		return
	}
	body, err := parseAddBody(b)
	if err != nil {
		Error(w, r, err)
		return
	}
	if _, err := parseParams(r.URL.RawQuery, nil); err != nil {
		Error(w, r, err)
		return
	}
	rec.group, rec.member = body.Group.Canonical(), body.NewMember.Canonical()
	res, err := s.cfg.Service.Add(r.Context(), p, body.Group, body.NewMember)
	if err != nil {
		Error(w, r, fmt.Errorf("add group member: %w", err))
		return
	}
	writeOK(w, r, res)
}

// writeOK encodes v before writing anything, so that an encoding failure is still a
// clean 500.
func writeOK(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		Error(w, r, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("encode response: %w", err)))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// cacheHeaderValues are the X-Dirgate-Cache header's values, allocated once.
var cacheHeaderValues = map[dirgate.CacheStatus][]string{
	dirgate.CacheHit: {string(dirgate.CacheHit)}, dirgate.CacheMiss: {string(dirgate.CacheMiss)},
	dirgate.CacheStale: {string(dirgate.CacheStale)}, dirgate.CacheBypass: {string(dirgate.CacheBypass)},
}

func cacheHeaderValue(st dirgate.CacheStatus) []string {
	if v, ok := cacheHeaderValues[st]; ok {
		return v
	}
	return []string{string(st)}
}
