// Package adattr lists the Active Directory attributes (and those of the schemas
// directories commonly hold) that the property policy's "*" leaves out
// (dirgate.NamedOnlyProperty): those holding secrets and those whose values name
// other objects, with where each comes from. The memory upstream, which has no schema,
// goes by them alone; the LDAP upstream reads its directory's schema as well
// (upstream/ldap/schema.go).
package adattr

import "slices"

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
	"userpkcs12":                          "RFC 2798 inetOrgPerson: a PKCS #12 file, the user's certificate with its private key (attributeID 2.16.840.1.113730.3.1.216)",
	"privatekey":                          "MS-ADA3 Private-Key: an encrypted private key",
	"msdns-signingkeys":                   "the DNS server's encrypted DNSSEC signing keys of an AD-integrated zone",
	"linktracksecret":                     "the secret of the distributed link tracking service",
}

// IsSecretProperty reports whether name (lower-case) is one of the built-in secret
// attributes that no caller receives unless its property policy names it.
func IsSecretProperty(name string) bool {
	_, ok := secretProperties[name]
	return ok
}

// SecretProperties lists the built-in secret attributes, lower-cased and sorted,
// with where each comes from.
func SecretProperties() [][2]string { return sortedPairs(secretProperties) }

func sortedPairs(m map[string]string) [][2]string {
	out := make([][2]string, 0, len(m))
	for k, v := range m {
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

// dnProperties are attributes whose values name other directory objects,
// lower-cased: by DN (the link and back-link attributes of Active Directory and the
// DN-valued attributes of RFC 4519, RFC 2307 and Exchange that directories commonly
// hold), by SID (the token groups, a computer's creator), by security descriptor
// (whose owner and access entries are SIDs of trustees), by RID (primaryGroupID) or
// by name (userWorkstations). A caller may view an object without being allowed to
// view the objects its memberOf, manager, directReports or mS-DS-CreatorSID name,
// so the property policy returns them only to a caller whose policy names them,
// as it does secrets (docs/policy.md, "Which properties a caller may read"). The
// LDAP upstream also reads every attribute of its directory's schema whose syntax
// names objects (upstream/ldap/schema.go): this list is what the memory upstream,
// which has no schema, goes by, and a floor for a schema read, which cannot see
// the attributes whose syntax is an integer or a string (primaryGroupID,
// userWorkstations, the replication metadata) nor an extension not installed
// (Exchange's). The value says where each comes from.
var dnProperties = map[string]string{
	"member":                                 "group membership (RFC 4519, AD linked attribute)",
	"memberof":                               "back-link of member: the groups an object belongs to",
	"msds-memberoftransitive":                "constructed: every group an object belongs to, nested included",
	"msds-membertransitive":                  "constructed: every member of a group, nested included",
	"tokengroups":                            "constructed: the SIDs of every security group of an account",
	"tokengroupsglobalanduniversal":          "constructed: the SIDs of an account's global and universal groups",
	"tokengroupsnogcacceptable":              "constructed: the SIDs of an account's groups, without a global catalog",
	"nonsecuritymember":                      "members of a non-security group (AD linked attribute)",
	"nonsecuritymemberbl":                    "back-link of nonSecurityMember",
	"uniquemember":                           "RFC 4519 groupOfUniqueNames membership",
	"roleoccupant":                           "RFC 4519 organizationalRole occupants",
	"mssfu30posixmember":                     "RFC 2307 / Services for UNIX group members",
	"mssfu30posixmemberof":                   "back-link of msSFU30PosixMember",
	"manager":                                "the object's manager (AD linked attribute)",
	"directreports":                          "back-link of manager: the people reporting to the object",
	"managedby":                              "the object's owner (AD linked attribute)",
	"managedobjects":                         "back-link of managedBy: what the object manages",
	"secretary":                              "RFC 4524 / AD: the person's secretary",
	"assistant":                              "AD: the person's assistant",
	"seealso":                                "RFC 4519: related objects",
	"owner":                                  "RFC 4519: the owners of the object",
	"ownerbl":                                "back-link of owner",
	"msds-primarycomputer":                   "the computers a user primarily uses (AD linked attribute)",
	"msds-isprimarycomputerfor":              "back-link of msDS-PrimaryComputer",
	"msds-hostserviceaccount":                "the managed service accounts a computer hosts (AD linked attribute)",
	"msds-hostserviceaccountbl":              "back-link of msDS-HostServiceAccount: the computers hosting a service account",
	"msds-revealedusers":                     "the accounts whose secrets a read-only DC holds",
	"msds-revealondemandgroup":               "the groups whose secrets a read-only DC may cache",
	"msds-neverrevealgroup":                  "the groups whose secrets a read-only DC never caches",
	"msds-authenticatedatdc":                 "back-link: the read-only DCs an account authenticated at",
	"msds-authenticatedtoaccountlist":        "the accounts that authenticated at a read-only DC",
	"msds-psoapplied":                        "back-link: the password settings objects applying to an object",
	"msds-psoappliesto":                      "the objects a password settings object applies to",
	"msds-resultantpso":                      "constructed: the password settings object in force for a user",
	"msds-assignedauthnpolicysilo":           "the authentication policy silo of an account",
	"msds-authnpolicysilomembers":            "the accounts of an authentication policy silo",
	"msds-oidtogrouplink":                    "the group an issuance policy grants (authentication mechanism assurance)",
	"msds-oidtogrouplinkbl":                  "back-link of msDS-OIDToGroupLink",
	"publicdelegates":                        "Exchange: who may send on behalf of the mailbox",
	"publicdelegatesbl":                      "back-link of publicDelegates",
	"msexchdelegatelistlink":                 "Exchange: who holds full access to the mailbox (automapping)",
	"msexchdelegatelistbl":                   "back-link of msExchDelegateListLink",
	"msexchcomanagedbylink":                  "Exchange: a distribution group's other managers",
	"altrecipient":                           "Exchange: where the mailbox forwards to",
	"altrecipientbl":                         "back-link of altRecipient",
	"msds-tokengroupnames":                   "constructed: the DNs of every security group of an account",
	"msds-tokengroupnamesglobalanduniversal": "constructed: the DNs of an account's global and universal groups",
	"msds-tokengroupnamesnogcacceptable":     "constructed: the DNs of an account's groups, without a global catalog",
	// Values that name objects by SID (attributeSyntax 2.5.5.17), by security
	// descriptor (2.5.5.15: the owner, group and every access entry's trustee are
	// SIDs), by RID or by name, which a schema read of DN syntaxes does not see.
	"ms-ds-creatorsid":                         "MS-ADA2 mS-DS-CreatorSID (SID syntax): the account that created a computer by the machine account quota, that is who joined it",
	"msds-quotatrustee":                        "MS-ADA2 msDS-QuotaTrustee (SID syntax): the account or group a quota applies to",
	"securityidentifier":                       "MS-ADA3 Security-Identifier (SID syntax): a trusted domain object's other domain",
	"msexchmasteraccountsid":                   "Exchange (SID syntax): the account owning a linked or shared mailbox",
	"ntsecuritydescriptor":                     "the object's security descriptor (2.5.5.15): its owner (a computer's joiner) and the trustee of every access entry",
	"msds-allowedtoactonbehalfofotheridentity": "resource-based constrained delegation (2.5.5.15): the accounts that may act as any user towards the object",
	"msds-groupmsamembership":                  "group managed service accounts (2.5.5.15): the accounts and groups that may read the password",
	"msexchmailboxsecuritydescriptor":          "Exchange (2.5.5.15): the mailbox's permissions, by trustee",
	"primarygroupid":                           "MS-ADA3 Primary-Group-ID (integer): the RID of the account's primary group (Domain Users, or a group chosen for it)",
	"userworkstations":                         "MS-ADA3 User-Workstations (string): the NetBIOS names of the computers the account may log on to",
	"msds-allowedtodelegateto":                 "MS-ADA2 msDS-AllowedToDelegateTo (string): the SPNs, thus the computers and service accounts, to which the account may delegate",
	"gplink":                                   "MS-ADA1 GP-Link (string): the DNs of the group policy objects linked to a container",
	"msds-replvaluemetadata":                   "constructed (string): the replication metadata of each linked value, with the DN of every member, removed ones included",
	"msds-replvaluemetadataext":                "constructed (string): msDS-ReplValueMetaData with the values' extended metadata (Windows Server 2016)",
	"msds-replattributemetadata":               "constructed (string): the replication metadata of each attribute, with the DN of the domain controller (its NTDS Settings object) that last wrote it",
}

// dnPropertiesCovered are the attributes of a syntax naming objects (a DN or a SID,
// upstream/ldap/schema.go) that "*" covers all the same: they name the object
// itself, its parent (both in the object's DN, which every answer carries) or a
// schema object, which every authenticated account of the directory may read and
// which objectType already summarises.
var dnPropertiesCovered = map[string]bool{
	"distinguishedname":   true, // the object's own DN
	"msds-parentdistname": true, // constructed: the DN of the object's parent
	"objectcategory":      true, // the classSchema object of the object's class
	"subschemasubentry":   true, // the schema's subentry (CN=Aggregate,CN=Schema,…)
	"objectsid":           true, // the object's own SID, an identifier of it the API accepts
	// The object's own former SIDs, from the domains it was migrated from
	// (MS-ADA3 SID-History): they name the object itself, under identities of
	// domains the API does not serve (docs/policy.md says why it stays covered).
	"sidhistory": true,
}

// IsDNProperty reports whether name (lower-case) is one of the built-in
// attributes whose values name other objects (dnProperties).
func IsDNProperty(name string) bool {
	_, ok := dnProperties[name]
	return ok
}

// DNPropertyCovered reports whether name (lower-case) is an attribute of a syntax
// naming objects that "*" covers nevertheless: the object's own DN or SIDs, its
// parent's DN, or a schema object (dnPropertiesCovered).
func DNPropertyCovered(name string) bool { return dnPropertiesCovered[name] }

// DNProperties lists the built-in attributes whose values name other objects,
// lower-cased and sorted, with where each comes from.
func DNProperties() [][2]string { return sortedPairs(dnProperties) }
