package dirgate

import (
	"errors"
	"slices"
)

// secretProperties are the attributes that hold credentials or the keys to them,
// lower-cased. The property policy returns them only to a caller whose policy names
// them explicitly (docs/policy.md, "Which properties a caller may read"), whether or
// not the directory's schema marks them confidential: a schema extension may leave
// the flag off (Microsoft's LAPS sets it, a hand-made copy may not), and the memory
// upstream has no schema at all. The value says where each comes from.
var secretProperties = map[string]string{
	// Legacy Microsoft LAPS (the ms-Mcs-AdmPwd schema extension): the local
	// administrator's password in clear text.
	"ms-mcs-admpwd": "legacy Microsoft LAPS",
	// Windows LAPS (Windows Server 2019+ with the April 2023 update,
	// Update-LapsADSchema): the password in clear text or encrypted, its history, and
	// the DSRM password of a domain controller.
	"mslaps-password":                     "Windows LAPS",
	"mslaps-encryptedpassword":            "Windows LAPS",
	"mslaps-encryptedpasswordhistory":     "Windows LAPS",
	"mslaps-encrypteddsrmpassword":        "Windows LAPS",
	"mslaps-encrypteddsrmpasswordhistory": "Windows LAPS",
	"msds-managedpassword":                "group managed service accounts (gMSA): the current and previous passwords",
	"mskds-rootkeydata":                   "Key Distribution Service root key, from which every gMSA password is derived",
	"unicodepwd":                          "MS-ADTS secret attribute: the NT hash of the account's password",
	"dbcspwd":                             "MS-ADTS secret attribute: the LM hash of the account's password",
	"ntpwdhistory":                        "MS-ADTS secret attribute: previous NT hashes",
	"lmpwdhistory":                        "MS-ADTS secret attribute: previous LM hashes",
	"supplementalcredentials":             "MS-ADTS secret attribute: Kerberos keys, WDigest hashes, cleartext (reversible encryption)",
	"currentvalue":                        "MS-ADTS secret attribute: an LSA secret's value",
	"priorvalue":                          "MS-ADTS secret attribute: an LSA secret's previous value",
	"initialauthincoming":                 "MS-ADTS secret attribute: a trust's initial incoming password",
	"initialauthoutgoing":                 "MS-ADTS secret attribute: a trust's initial outgoing password",
	"trustauthincoming":                   "MS-ADTS secret attribute: a trust's incoming password",
	"trustauthoutgoing":                   "MS-ADTS secret attribute: a trust's outgoing password",
	"peklist":                             "the domain's password encryption keys (Samba stores them on the domain object)",
	"userpassword":                        "RFC 4519 password; AD writes it as unicodePwd, other directories keep it (often in clear text)",
	"unixuserpassword":                    "RFC 2307 / Identity Management for UNIX password hash",
	"mssfu30password":                     "Services for UNIX 3.0 password hash",
	"msds-keycredentiallink":              "Windows Hello for Business and FIDO keys: writing it is an account takeover, reading it maps keys to accounts",
	"msfve-recoverypassword":              "BitLocker recovery password",
	"msfve-keypackage":                    "BitLocker key package (the volume's encrypted key)",
	"mstpm-ownerinformation":              "the TPM owner's authorization value (Windows 8 and earlier)",
	"mspkiaccountcredentials":             "credential roaming: the account's certificates and private keys",
	"mspki-credentialroamingtokens":       "credential roaming tokens",
	"mspkidpapimasterkeys":                "credential roaming: the account's DPAPI master keys",
	"mspkiroamingtimestamp":               "credential roaming timestamps",
	"msds-executescriptpassword":          "a domain rename script's password",
}

// IsSecretProperty reports whether name (lower-case) is one of the built-in secret
// attributes that no caller receives unless its property policy names it.
func IsSecretProperty(name string) bool {
	_, ok := secretProperties[name]
	return ok
}

// SecretProperties lists the built-in secret attributes, lower-cased and sorted,
// with where each comes from.
func SecretProperties() [][2]string {
	out := make([][2]string, 0, len(secretProperties))
	for k, v := range secretProperties {
		out = append(out, [2]string{k, v})
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	return out
}

// ConfidentialSchema is implemented by an upstream that reads which attributes its
// directory's schema marks confidential (searchFlags bit 0x80, CONFIDENTIAL in
// MS-ADTS 3.1.1.2.3): the property policy treats them as secret
// (docs/policy.md). The LDAP upstream reads them at start-up and again
// periodically; the memory upstream has no schema and does not implement it.
type ConfidentialSchema interface {
	// ConfidentialAttributes returns the lower-cased lDAPDisplayNames of the
	// confidential attributes, as last read. The map is shared and must not be
	// modified; it is replaced, never changed, when the schema is read again.
	ConfidentialAttributes() map[string]bool
}

// ErrPropertiesWithheld is a ViewSelector's answer when some of the listing's
// requested properties are withheld from the caller, or may be as far as it knows
// yet, which a selection of shared objects cannot do: MemberService.Select then
// declines to select, and the renderer (render.Lister) renders the objects
// FilterView returns (altered copies: the listing's objects are shared) rather than
// a body shared by the callers that select the same objects.
var ErrPropertiesWithheld = errors.New("properties may be withheld: decide with FilterView")
