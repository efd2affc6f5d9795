// Package render renders listing responses: the JSON body of a group's listing as a
// caller receives it, joined from the objects' encodings a cache keeps
// (the dirgate.Listing's Encoded, an encodedlisting.Listing) instead of encoding
// every object again, and shared between the callers who
// receive exactly the same objects of the same listing (BodyCache), with the
// compressed forms of each body made once. The domain (dirgate.MemberService)
// decides what a caller receives; this package only writes it (docs/cache.md,
// "Rendered bodies").
package render

import (
	"context"
	"fmt"

	"github.com/dirgate/dirgate"
)

// Service is the domain's side of a listing: *dirgate.MemberService implements it.
type Service interface {
	// ListingFor resolves groupID, a group p may view, and returns it with its
	// unfiltered listing.
	ListingFor(ctx context.Context, p dirgate.Principal, groupID dirgate.Identifier, opts dirgate.ListOptions) (dirgate.Object, dirgate.Listing, error)
	// Select decides the listing for p as a selection of its positions, sizeLimit
	// applied; false when it must be decided by Filter.
	Select(ctx context.Context, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) (dirgate.Selection, bool, error)
	// Filter returns the objects of the listing p receives, sizeLimit applied.
	Filter(ctx context.Context, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, objs []dirgate.Object) ([]dirgate.Object, error)
}

var _ Service = (*dirgate.MemberService)(nil)

// Response is what ListBody returns: a *Body, seen through the methods the HTTP layer
// reads. It is an alias of an unnamed interface type, so that a consumer declaring
// the same methods the same way (proxy.Body) names the very same type, and
// *Lister implements that consumer's interface without either package importing
// the other.
type Response = interface {
	JSON() []byte
	Variant(name string, make func(json []byte) []byte) []byte
}

// Lister answers listings with rendered bodies. It is safe for concurrent use.
type Lister struct {
	svc    Service
	bodies *BodyCache
}

// NewLister renders svc's listings, keeping shared bodies in bodies; nil bodies
// renders every body for its request.
func NewLister(svc Service, bodies *BodyCache) *Lister {
	return &Lister{svc: svc, bodies: bodies}
}

// ListBody is svc's List rendered as the response's JSON, and how the listing was
// served. When the listing comes with its objects' encodings (from a cache) and svc
// decides it as a selection, the body is the one rendered for the same listing and
// the same selection of its objects, sizeLimit applied, kept in the Lister's
// BodyCache: two callers share a body only when they receive exactly the same objects
// of the same listing. Otherwise it is rendered from Filter's result.
func (l *Lister) ListBody(ctx context.Context, p dirgate.Principal, groupID dirgate.Identifier, opts dirgate.ListOptions) (Response, dirgate.CacheStatus, error) {
	group, listing, err := l.svc.ListingFor(ctx, p, groupID, opts)
	if err != nil {
		return nil, "", err
	}
	e := listing.Encoded
	if e == nil || e.Fragments() == nil {
		body, err := l.renderFiltered(ctx, p, group, opts, listing)
		return body, listing.Status, err
	}
	chosen, ok, err := l.svc.Select(ctx, p, group, opts, listing.Objects)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		body, err := l.renderFiltered(ctx, p, group, opts, listing)
		return body, listing.Status, err
	}
	bodies := l.bodies
	if listing.Status == dirgate.CacheBypass {
		// Read for this request (and those that joined its read) and then dropped: no
		// later request finds this listing, so its body is not worth keeping.
		bodies = nil
	}
	n := 0
	if listing.Status == dirgate.CacheBypass {
		// Only a listing that was not kept can show unresolved objects (the cache
		// keeps none that does): a hit costs no pass over its objects.
		chosen.Each(func(i int) {
			if listing.Objects[i].Unresolved {
				n++
			}
		})
	}
	return withUnresolved(bodies.body(e, chosen), n), listing.Status, nil
}

// partial is a body that shows n objects standing for objects of another
// directory that could not be asked (dirgate.Object.Unresolved), counted among
// those the caller is shown: its Unresolved method is proxy's unresolvedBody, and
// the handler says n in a header (docs/api.md).
type partial struct {
	Response
	n int
}

func (p partial) Unresolved() int { return p.n }

// withUnresolved is body, saying n when there are any.
func withUnresolved(body Response, n int) Response {
	if n == 0 {
		return body
	}
	return partial{body, n}
}

// renderFiltered renders Filter's result for a listing, joined from the listing's
// encodings where the objects are unchanged.
func (l *Lister) renderFiltered(ctx context.Context, p dirgate.Principal, group dirgate.Object, opts dirgate.ListOptions, listing dirgate.Listing) (Response, error) {
	objs, err := l.svc.Filter(ctx, p, group, opts, listing.Objects)
	if err != nil {
		return nil, err
	}
	b, err := AppendJSON(nil, listing, objs)
	if err != nil {
		return nil, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("encode response: %w", err))
	}
	return withUnresolved(NewBody(b), dirgate.CountUnresolved(objs)), nil
}
