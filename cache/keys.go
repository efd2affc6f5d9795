package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/dirgate/dirgate"
)

// keys builds store keys. No value from a request or the directory reaches a key
// as it is: a group's GUID is used only in its canonical form (36 characters of
// lower-case hex and hyphens), and everything else (DNs, property names) is hashed.
// Each entry also stores the exact inputs of its key (its check string), compared on
// decode, so that not even a hash collision or a foreign writer can make one key
// serve another's value.
//
// A group's keys carry its GUID as a Redis Cluster hash tag, {guid}, so that its
// version and its entries live in one slot and the conditional store (a Lua script
// that reads the version and writes the entry) is allowed in a cluster. The same
// prefix and tag start the write journal's keys, {guid}:w and {guid}:w:at
// (writejournal/journal.go), which no key here may take.
type keys struct{ prefix string }

// ready is the key Ready reads (and nobody writes).
func (k keys) ready() string { return k.prefix + "ready" }

// version is the key of a group's (or object's) version token.
func (k keys) version(guid string) string { return k.prefix + "{" + guid + "}:v" }

// listing returns the key and check string of a group's unfiltered listing.
func (k keys) listing(guid string, indirect bool, props []string) (key, check string) {
	var b strings.Builder
	b.WriteString("listing|")
	b.WriteString(guid)
	if indirect {
		b.WriteString("|indirect")
	} else {
		b.WriteString("|direct")
	}
	for _, p := range props {
		b.WriteString("|")
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteString(":")
		b.WriteString(p)
	}
	check = b.String()
	return k.prefix + "{" + guid + "}:l:" + digest(check), check
}

// fillClaim is the key of the claim on an entry's fill (claim.go): the entry's key
// with a suffix, in the same slot.
func (k keys) fillClaim(entryKey string) string { return entryKey + ":fill" }

// lookup returns the key and check string of an identifier's resolution. DNs are
// keyed by their normalised form, so that spellings the directory treats as equal
// share an entry.
func (k keys) lookup(id dirgate.Identifier) (key, check string) {
	form := id.Canonical()
	if id.Kind() == dirgate.KindDN {
		form = id.DN().Key()
	}
	check = "lookup|" + id.Kind().String() + "|" + form
	return k.prefix + lookupTag + digest(check), check
}

// lookupTag follows the prefix in every lookup's key.
const lookupTag = "o:"

// isLookup reports whether key is an identifier resolution's (lookup).
func (k keys) isLookup(key string) bool { return strings.HasPrefix(key, k.prefix+lookupTag) }

// digest is 128 bits of SHA-256 in hex: collisions are out of reach, and the check
// string catches them anyway.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// canonicalGUID reports whether g is a GUID in the form the upstreams render
// (GUIDFromBytes): only such GUIDs are put in keys; objects with any other GUID are
// not cached.
func canonicalGUID(g string) bool {
	if len(g) != 36 {
		return false
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
