package memory

import (
	"bytes"
	"context"
	"testing"

	"github.com/dirgate/dirgate"
)

// FuzzLoadLDIF: the loader never panics on hostile LDIF, and whatever it accepts
// serves every operation on every entry without panicking or failing.
func FuzzLoadLDIF(f *testing.F) {
	f.Add([]byte(small))
	f.Add(demoRecord("# CN=Finance Team,"))
	f.Add([]byte("version: 1\n\ndn:: Q049eCxEQz15\nobjectGUID:: AAAAAAAAAAAAAAAAAAAAAA==\n"))
	f.Add([]byte("dn: CN=a\\,b,DC=x\nobjectGUID:: AAAAAAAAAAAAAAAAAAAAAA==\nprimaryGroupID: 513\nobjectSid:: AQEAAAAAAAULAAAA\nmember: CN=a\\2Cb,DC=x\n"))
	f.Add([]byte("dn: CN=x\ncontrol: 1.2.3 true\nchangetype: add\ncn: x\n"))
	f.Add([]byte("dn: CN=x\n description:\n < file:///dev/zero\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Load("fuzz.ldif", data)
		if err != nil {
			return
		}
		ctx := context.Background()
		for _, r := range d.records {
			for _, ident := range []string{r.entry.DN, r.guid} {
				id, err := dirgate.ParseIdentifier(ident)
				if err != nil {
					continue // a loadable DN may still exceed the client-facing limits
				}
				o, err := d.Lookup(ctx, id, []string{"member", "memberof", "objectsid"})
				if err != nil {
					t.Fatalf("lookup %q of a loaded entry: %v", ident, err)
				}
				if _, err := d.Members(ctx, o, nil); err != nil {
					t.Fatalf("members of %q: %v", ident, err)
				}
				if _, err := d.MemberOf(ctx, o); err != nil {
					t.Fatalf("memberOf %q: %v", ident, err)
				}
			}
			for _, m := range r.members {
				g, _ := d.render(r, nil)
				o, _ := d.render(m, nil)
				if err := d.RemoveMember(ctx, g, o); err != nil {
					t.Fatalf("remove %q from %q: %v", m.entry.DN, r.entry.DN, err)
				}
			}
		}
	})
}

// demoRecord returns the demo's record that starts with the comment prefix: a real
// export record, small enough for the fuzzer to mutate quickly.
func demoRecord(prefix string) []byte {
	i := bytes.Index(demoLDIF, []byte(prefix))
	if i < 0 {
		panic("no demo record " + prefix)
	}
	rec := demoLDIF[i:]
	if j := bytes.Index(rec, []byte("\n\n")); j >= 0 {
		rec = rec[:j+1]
	}
	return rec
}
