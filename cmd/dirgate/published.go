package main

import "slices"

// publishedSecrets are secret files' contents (white space trimmed, as
// session.ReadSecret reads them) that dirgate's source has published: the compose
// try-out's former example, which copies of deploy/compose may still mount. HMACs
// keyed by a public value would let anyone who can write to Redis forge what
// dirgate keeps there (docs/auth.md, "What Redis holds").
var publishedSecrets = []string{
	"compose try-out only: a committed, public secret; never reuse it",
}

// isPublishedSecret reports whether secret is one of publishedSecrets.
func isPublishedSecret(secret []byte) bool {
	return slices.Contains(publishedSecrets, string(secret))
}
