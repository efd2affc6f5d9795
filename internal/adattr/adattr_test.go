package adattr

import (
	"strings"
	"testing"
)

// TestPropertyListsLowerCase: the built-in lists are looked up with the lower-case
// names NormalizeProperties makes; an entry with a capital letter would never match.
// No attribute is both DN-valued and covered.
func TestPropertyListsLowerCase(t *testing.T) {
	for _, list := range [][][2]string{SecretProperties(), DNProperties()} {
		for _, e := range list {
			if e[0] != strings.ToLower(e[0]) || e[1] == "" {
				t.Errorf("%q (%q): want a lower-case name and its source", e[0], e[1])
			}
			if DNPropertyCovered(e[0]) {
				t.Errorf("%q is both named-only and covered by \"*\"", e[0])
			}
		}
	}
	if !IsSecretProperty("userpkcs12") {
		t.Error("userPKCS12 (a certificate and its private key) is not secret")
	}
}
