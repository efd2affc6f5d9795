// Package dirgate holds the domain of the dirgate gateway: directory objects,
// identifiers, listing options, the operation result, the authenticated principal,
// the Directory interface every upstream implements, the member service that gives
// the API its semantics over any Directory, and the coded errors that one table in
// package proxy maps to HTTP statuses.
//
// Subpackages wrap one technology each (proxy: HTTP; upstream/*: directories;
// cache, policy) and import only this package; cmd/dirgate wires them together.
// Mechanism that several share is in internal/: the byte-level JSON encoding of an
// object's values, LDAP entries and AD's value syntaxes, the keyed sort of a
// listing, the bit set of a selection. This package holds the domain only.
package dirgate
