package dirgate_test

import (
	"testing"

	"github.com/dirgate/dirgate"
)

// TestNamedOnlyProperty: the property policy's "*" leaves out the built-in secrets
// (userPKCS12 among them), the built-in attributes naming other objects, the
// schema's confidential and DN-valued attributes, and every name given as an OID
// (a secret's, a DN-valued attribute's, or one no list knows), the attributes naming
// objects by SID, security descriptor, RID or name (a computer's creator, the
// delegation trustees, the primary group, the workstations, the replication
// metadata of linked values); it covers the object's own DN, its own SID and former
// SIDs, its class and public attributes.
func TestNamedOnlyProperty(t *testing.T) {
	schema := map[string]bool{"ipsecfilterreference": true, "ms-mcs-admpwd": true}
	for _, tc := range []struct {
		name      string
		namedOnly bool
	}{
		{"userpkcs12", true},
		{"ms-mcs-admpwd", true},
		{"unicodepwd", true},
		{"memberof", true},
		{"member", true},
		{"manager", true},
		{"directreports", true},
		{"managedby", true},
		{"ipsecfilterreference", true},             // the schema's
		{"2.16.840.1.113730.3.1.216", true},        // userPKCS12
		{"1.2.840.113556.1.2.102", true},           // memberOf
		{"1.2.840.113556.1.4.90", true},            // unicodePwd
		{"2.5.4.13", true},                         // description: an OID is never taken to be public
		{"1.2.840.113556.1.8000.2554.50051", true}, // an extension's
		{"ms-ds-creatorsid", true},
		{"msexchmasteraccountsid", true},
		{"msds-allowedtoactonbehalfofotheridentity", true},
		{"msds-groupmsamembership", true},
		{"ntsecuritydescriptor", true},
		{"primarygroupid", true},
		{"userworkstations", true},
		{"msds-replvaluemetadata", true},
		{"msds-replattributemetadata", true},
		{"msds-tokengroupnames", true},
		{"objectsid", false},
		{"sidhistory", false},
		{"homedirectory", false},        // a share of the account's own
		{"serviceprincipalname", false}, // the object's own names
		{"replpropertymetadata", false}, // attributes and DC invocation IDs
		{"description", false},
		{"mail", false},
		{"distinguishedname", false},
		{"objectcategory", false},
		{"usercertificate", false}, // a public certificate
		{"m1", false},              // a name starting with a letter is no OID
	} {
		if got := dirgate.NamedOnlyProperty(tc.name, schema); got != tc.namedOnly {
			t.Errorf("NamedOnlyProperty(%q) = %v, want %v", tc.name, got, tc.namedOnly)
		}
	}
	if dirgate.NamedOnlyProperty("ipsecfilterreference", nil) {
		t.Error("ipsecFilterReference is named-only without a schema: it is not on the built-in list")
	}
}
