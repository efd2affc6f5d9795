package domains

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/ldapentry"
)

// Members asks the group's own domain, then replaces each member that stands for
// an object of another configured domain by that object, as that domain holds it
// (resolveForeign). Each object is listed once, by GUID.
func (r *Directory) Members(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	d := r.ofObject(group)
	objs, err := d.Dir.Members(ctx, group, props)
	if err != nil {
		return nil, err
	}
	replaced, err := r.resolveForeign(ctx, d, objs, props)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(replaced, true) {
		return objs, nil // as the domain listed them: each once already
	}
	return r.dedupe(ctx, d, objs, replaced), nil
}

// TransitiveMembers lists every object below group across domains: the group's
// domain lists what lies below it there (its TransitiveMembers), the foreign members
// found are replaced as in Members, and each group of another domain so found is
// listed below in its own domain in turn, until no new group appears. Each object is
// listed once, by GUID, and never group itself; a cycle through several domains ends
// there. It fails with EINTERNAL when a domain's directory has no transitive
// listing.
func (r *Directory) TransitiveMembers(ctx context.Context, group dirgate.Object, props []string) ([]dirgate.Object, error) {
	visited := map[string]bool{group.GUID: true}
	var out []dirgate.Object
	queue := []dirgate.Object{group}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		d := r.ofObject(g)
		t, ok := d.Dir.(dirgate.TransitiveLister)
		if !ok {
			return nil, dirgate.WrapError(dirgate.EINTERNAL, "", fmt.Errorf("domains: transitive members: the directory of %s has no transitive listing", d.name))
		}
		objs, err := t.TransitiveMembers(ctx, g, props)
		if err != nil {
			return nil, err
		}
		replaced, err := r.resolveForeign(ctx, d, objs, props)
		if err != nil {
			return nil, err
		}
		clash := r.clashes(ctx, d, objs, replaced)
		for i, o := range objs {
			if visited[o.GUID] || clash[i] {
				continue
			}
			visited[o.GUID] = true
			out = append(out, o)
			// What lies below a group of the same domain is in this answer already;
			// below a group of another domain, only that domain can say.
			if replaced[i] && o.IsGroup() {
				queue = append(queue, o)
			}
		}
	}
	return out, nil
}

// foreign is a member to replace: its position, the domain that holds the object
// it stands for, and the identifier to look it up by there.
type foreign struct {
	i  int
	d  *domain
	id dirgate.Identifier
}

// resolveForeign replaces, in place, each object of objs (read from own) that
// stands for an object of another configured domain by that object with props, as
// that domain holds it: a foreign security principal whose SID's domain part is
// that domain's SID (looked up by SID there), and, when both domains are of one
// forest, an object whose DN lies under that domain's base DN (looked up there by
// the GUID the group's directory holds for it): within one forest AD holds a member
// of another domain by its DN, and the group's directory lists it as a placeholder
// that this replaces. It reports which positions it replaced.
//
// An object no domain resolves (not found there) is kept as own listed it, and so
// is every one of a domain that fails: after its first failure in this call, the
// domain is not asked again, so that a domain that is down costs one failed
// look-up per group read (a nested listing reads several), not one per member (at
// most as many as were in flight when it failed). The look-ups run concurrently, at
// most Concurrency at once over every call of the router. Only the caller's
// context ending is an error.
func (r *Directory) resolveForeign(ctx context.Context, own *domain, objs []dirgate.Object, props []string) ([]bool, error) {
	var todo []foreign
	for i := range objs {
		if f, ok := r.foreignOf(own, &objs[i]); ok {
			f.i = i
			todo = append(todo, f)
		}
	}
	replaced := make([]bool, len(objs))
	if len(todo) == 0 {
		return replaced, nil
	}
	failed := make([]atomic.Pointer[error], len(r.domains))
	index := make(map[*domain]int, len(r.domains))
	for i, d := range r.domains {
		index[d] = i
	}
	var wg sync.WaitGroup
start:
	for _, f := range todo {
		k := index[f.d]
		if failed[k].Load() != nil {
			continue // skipped before it is started: the domain failed
		}
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			break start
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-r.slots }()
			if failed[k].Load() != nil {
				return
			}
			o, err := f.d.Dir.Lookup(ctx, f.id, props)
			if err == nil && r.checkAnswer(ctx, f.d, f.id, o) != nil {
				return // refused and logged: kept as own listed it
			}
			switch dirgate.ErrorCode(err) {
			case "":
				objs[f.i], replaced[f.i] = o, true
			case dirgate.ENOTFOUND:
			default:
				failed[k].CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("domains: resolve foreign members: %w", err)
	}
	for k := range failed {
		if e := failed[k].Load(); e != nil {
			r.log.WarnContext(ctx, "domains: foreign members of another domain listed as the directory holds them: the domain failed",
				"domain", r.domains[k].name, "err", *e)
		}
	}
	for _, f := range todo {
		if !replaced[f.i] && failed[index[f.d]].Load() != nil {
			// Not asked, or asked in vain: the listing must not be kept as it is.
			objs[f.i].Unresolved = true
		}
	}
	return replaced, nil
}

// foreignOf says whether o, read from own, stands for an object of another
// configured domain, and how to look that object up there.
func (r *Directory) foreignOf(own *domain, o *dirgate.Object) (foreign, bool) {
	if o.ObjectType == dirgate.TypeForeignPrincipal {
		d := r.ofSID(o.SID)
		if d == nil || d == own {
			return foreign{}, false
		}
		id, err := dirgate.ParseIdentifier(o.SID)
		if err != nil || id.Kind() != dirgate.KindSID {
			return foreign{}, false
		}
		return foreign{d: d, id: id}, true
	}
	if in, ok := ldapentry.ContainsPlain(own.base, o.DN); ok && in && !own.hasChild {
		return foreign{}, false // most members: decided without parsing
	}
	// A member held by DN in another domain of the group's forest: looked up there
	// by the GUID the group's DC holds for it, so that the answer is the object
	// the group holds (checkAnswer: that GUID, under that domain's base DN), even
	// when the DC's copy of its DN is out of date. Only within one forest: a domain
	// of another forest holds no member by another domain's DN.
	d := r.ofDN(o.DN)
	if d == nil || d == own || !sameForest(own, d) {
		return foreign{}, false
	}
	id, err := dirgate.ParseIdentifier(o.GUID)
	if err != nil || id.Kind() != dirgate.KindGUID {
		return foreign{}, false
	}
	return foreign{d: d, id: id}, true
}

// clashes marks each replaced object of objs (read from own) whose GUID is that of
// an object own listed itself: another domain's answer cannot take the place of
// the group's own domain's object, which a listing would otherwise drop as a
// duplicate. Each clash is logged (bounded).
func (r *Directory) clashes(ctx context.Context, own *domain, objs []dirgate.Object, replaced []bool) []bool {
	owned := make(map[string]bool, len(objs))
	for i, o := range objs {
		if !replaced[i] {
			owned[o.GUID] = true
		}
	}
	clash := make([]bool, len(objs))
	for i, o := range objs {
		if replaced[i] && owned[o.GUID] {
			clash[i] = true
			if d := r.ofDN(o.DN); d != nil {
				r.refused(ctx, d, "it carries the GUID of an object of the group's own domain "+own.name, o)
			}
		}
	}
	return clash
}

// dedupe keeps the first object of each GUID, in place, never a replaced one
// whose GUID is that of an object own listed (clashes).
func (r *Directory) dedupe(ctx context.Context, own *domain, objs []dirgate.Object, replaced []bool) []dirgate.Object {
	clash := r.clashes(ctx, own, objs, replaced)
	seen := make(map[string]bool, len(objs))
	out := objs[:0]
	for i, o := range objs {
		if seen[o.GUID] || clash[i] {
			continue
		}
		seen[o.GUID] = true
		out = append(out, o)
	}
	return out
}
