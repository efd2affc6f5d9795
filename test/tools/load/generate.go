package load

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/dirgate/dirgate/test/harness/fixture"
)

// GeneratedGroupDN is the group of GeneratedExport: every generated user is one of
// its direct members.
const GeneratedGroupDN = "CN=Generated Staff," + fixture.GroupsOU

// GeneratedExport is an AD LDIF export for the memory upstream: the large fixture
// plus n users under OU=Staff, each with the attributes an AD user has (names, mail,
// account and password state, GUID, SID), all of them the direct members of
// GeneratedGroupDN. The same n gives the same bytes. Large listings are measured on
// it: 100,000 members make a 69 MB export, too large to commit.
func GeneratedExport(n int) []byte {
	var b bytes.Buffer
	b.Write(fixture.Export(fixture.Large()))
	sid := func(rid uint32) string {
		// S-1-5-21-1-2-3-rid, a domain of its own beside the fixture's.
		s := []byte{1, 5, 0, 0, 0, 0, 0, 5}
		for _, a := range []uint32{21, 1, 2, 3, rid} {
			s = binary.LittleEndian.AppendUint32(s, a)
		}
		return base64.StdEncoding.EncodeToString(s)
	}
	guid := func(i int) string {
		h := sha256.Sum256(fmt.Appendf(nil, "generated %d", i))
		return base64.StdEncoding.EncodeToString(h[:16])
	}
	dns := make([]string, n)
	for i := range n {
		cn := fmt.Sprintf("Generated User %06d", i)
		sam := fmt.Sprintf("gen.user%06d", i)
		dns[i] = "CN=" + cn + "," + fixture.StaffOU
		fmt.Fprintf(&b, "\ndn: %s\nobjectClass: top\nobjectClass: person\nobjectClass: organizationalPerson\nobjectClass: user\n"+
			"cn: %s\nsn: User %06d\ngivenName: Generated\ndisplayName: %s\ntitle: Clerk\ndepartment: Operations\n"+
			"telephoneNumber: +1 555 %07d\nmail: %s@corp.example.com\nuserPrincipalName: %s@corp.example.com\n"+
			"sAMAccountName: %s\nsAMAccountType: 805306368\nuserAccountControl: 512\nprimaryGroupID: 513\n"+
			"accountExpires: 9223372036854775807\npwdLastSet: 157156717500000000\nwhenCreated: 20240304092230.0Z\n"+
			"whenChanged: 20240304112230.0Z\nuSNCreated: %d\nuSNChanged: %d\nobjectGUID:: %s\nobjectSid:: %s\n",
			dns[i], cn, i, cn, i, sam, sam, sam, 100000+2*i, 100001+2*i, guid(i), sid(uint32(100000+i)))
	}
	fmt.Fprintf(&b, "\ndn: %s\nobjectClass: top\nobjectClass: group\ncn: Generated Staff\nsAMAccountName: Generated Staff\n"+
		"sAMAccountType: 268435456\ngroupType: -2147483640\nobjectGUID:: %s\nobjectSid:: %s\n",
		GeneratedGroupDN, guid(-1), sid(99999))
	for _, dn := range dns {
		fmt.Fprintf(&b, "member: %s\n", dn)
	}
	return b.Bytes()
}
