package proxy

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
)

const testGroupDN = "CN=Sales,OU=Groups,DC=corp,DC=com"

var testGroupQ = "group=" + url.QueryEscape(testGroupDN)

func TestParseListQuery(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantGroup string // canonical
		want      dirgate.ListOptions
	}{
		// docs/api.md, "GET parameters": only group is required; the defaults are
		// direct members, default properties, no limit.
		{"group only", testGroupQ, testGroupDN, dirgate.ListOptions{}},
		{"GUID group", "group=%7B0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0%7D", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", dirgate.ListOptions{}},
		{"SID group", "group=S-1-5-32-544", "S-1-5-32-544", dirgate.ListOptions{}},
		// A DN with an escaped comma, percent-encoded as clients send it.
		{"DN with escaped comma", "group=" + url.QueryEscape(`CN=Smith\, J,DC=x`), `CN=Smith\, J,DC=x`, dirgate.ListOptions{}},
		// "+" is a space in a query string (form encoding), as clients expect.
		{"plus is space", "group=CN=Domain+Admins,DC=x", "CN=Domain Admins,DC=x", dirgate.ListOptions{}},
		{"includeIndirect true", testGroupQ + "&includeIndirect=true", testGroupDN, dirgate.ListOptions{IncludeIndirect: true}},
		// docs/compatibility.md, "Requests": clients send "True".
		{"includeIndirect True", testGroupQ + "&includeIndirect=True", testGroupDN, dirgate.ListOptions{IncludeIndirect: true}},
		{"includeIndirect FALSE", testGroupQ + "&includeIndirect=FALSE", testGroupDN, dirgate.ListOptions{}},
		// Parameter names match without regard to case, as on the product's server.
		{"names in other case", "GROUP=S-1-5-11&INCLUDEINDIRECT=true&SizeLimit=3", "S-1-5-11", dirgate.ListOptions{IncludeIndirect: true, SizeLimit: 3}},
		// Names can be percent-encoded too.
		{"encoded name", "gr%6Fup=S-1-5-11", "S-1-5-11", dirgate.ListOptions{}},
		{"properties normalised", testGroupQ + "&properties=mail,accountExpires,MAIL", testGroupDN, dirgate.ListOptions{Properties: []string{"accountexpires", "mail"}}},
		{"properties encoded comma", testGroupQ + "&properties=mail%2Cdepartment", testGroupDN, dirgate.ListOptions{Properties: []string{"department", "mail"}}},
		// 0 is "no limit" (dirgate.ListOptions).
		{"sizeLimit 0", testGroupQ + "&sizeLimit=0", testGroupDN, dirgate.ListOptions{}},
		{"sizeLimit max", testGroupQ + "&sizeLimit=" + strconv.Itoa(MaxSizeLimit), testGroupDN, dirgate.ListOptions{SizeLimit: MaxSizeLimit}},
		// Leading zeros are digits like any other, within the digit bound.
		{"sizeLimit leading zeros", testGroupQ + "&sizeLimit=0000000007", testGroupDN, dirgate.ListOptions{SizeLimit: 7}},
		// Unknown parameters are ignored, even repeated; member is unknown to GET.
		{"unknown ignored", testGroupQ + "&member=x&member=y&foo&=bar&x=%41", testGroupDN, dirgate.ListOptions{}},
		// Empty pairs from "&&" or a trailing "&" are not parameters.
		{"empty pairs", "&&" + testGroupQ + "&", testGroupDN, dirgate.ListOptions{}},
		// ";" is not a parameter separator: it stays in the group value (where a DN may
		// use it between RDNs).
		{"semicolon literal", testGroupQ + ";sizeLimit=5", testGroupDN + ";sizeLimit=5", dirgate.ListOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := parseListQuery(tt.raw)
			if err != nil {
				t.Fatalf("parseListQuery(%q): %v", tt.raw, err)
			}
			if q.Group.Canonical() != tt.wantGroup {
				t.Errorf("group %q, want %q", q.Group.Canonical(), tt.wantGroup)
			}
			if q.Options.IncludeIndirect != tt.want.IncludeIndirect || q.Options.SizeLimit != tt.want.SizeLimit || !slices.Equal(q.Options.Properties, tt.want.Properties) {
				t.Errorf("options %+v, want %+v", q.Options, tt.want)
			}
		})
	}
}

func TestParseListQueryRejects(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantParam string // "" when no single parameter is at fault
		wantMsg   string // a fragment of the message
	}{
		{"no query", "", "group", "is required"},
		{"group empty", "group=", "group", "is empty"},
		{"group not an identifier", "group=Sales", "group", "not a DN, GUID or SID"},
		{"group bad SID", "group=S-2-5-11", "group", "revision 2"},
		{"group too long", "group=CN%3D" + strings.Repeat("a", dirgate.MaxIdentifierLength), "group", "longer than 2048 bytes"},
		// One value per known parameter: which one the client meant is unknowable.
		{"group repeated", testGroupQ + "&group=S-1-5-11", "group", "more than once"},
		{"group repeated in other case", testGroupQ + "&Group=S-1-5-11", "group", "more than once"},
		{"includeIndirect repeated", testGroupQ + "&includeIndirect=true&includeindirect=true", "includeIndirect", "more than once"},
		{"includeIndirect yes", testGroupQ + "&includeIndirect=yes", "includeIndirect", "true or false"},
		{"includeIndirect 1", testGroupQ + "&includeIndirect=1", "includeIndirect", "true or false"},
		{"includeIndirect empty", testGroupQ + "&includeIndirect=", "includeIndirect", "true or false"},
		// Unicode folding would take "ſ" (U+017F) for "s".
		{"includeIndirect long s", testGroupQ + "&includeIndirect=fal%C5%BFe", "includeIndirect", "true or false"},
		// docs/api.md, "GET parameters": no whitespace, no empty names.
		{"properties with space", testGroupQ + "&properties=mail,%20department", "properties", "not an LDAP attribute name"},
		{"properties empty name", testGroupQ + "&properties=mail,,cn", "properties", "empty property name"},
		{"properties empty", testGroupQ + "&properties=", "properties", "empty property name"},
		{"properties option", testGroupQ + "&properties=member;range=0-5", "properties", "not an LDAP attribute name"},
		{"properties too long", testGroupQ + "&properties=" + strings.Repeat("a,", MaxPropertiesLength/2) + "a", "properties", "longer than 4096 bytes"},
		{"properties too many", testGroupQ + "&properties=" + manyProps(dirgate.MaxProperties+1), "properties", "more than 100"},
		{"sizeLimit negative", testGroupQ + "&sizeLimit=-1", "sizeLimit", "non-negative decimal integer"},
		// strconv.Atoi would accept "+5".
		{"sizeLimit plus", testGroupQ + "&sizeLimit=%2B5", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit leading space", testGroupQ + "&sizeLimit=%205", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit trailing space", testGroupQ + "&sizeLimit=5+", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit empty", testGroupQ + "&sizeLimit=", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit hex", testGroupQ + "&sizeLimit=0x10", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit fraction", testGroupQ + "&sizeLimit=1.5", "sizeLimit", "non-negative decimal integer"},
		{"sizeLimit above max", testGroupQ + "&sizeLimit=" + strconv.Itoa(MaxSizeLimit+1), "sizeLimit", "must not exceed 1000000"},
		{"sizeLimit ten nines", testGroupQ + "&sizeLimit=9999999999", "sizeLimit", "must not exceed"},
		{"sizeLimit eleven digits", testGroupQ + "&sizeLimit=00000000001", "sizeLimit", "longer than 10 bytes"},
		// A bad escape anywhere, even in an unknown parameter, makes the query malformed.
		{"bad escape in value", "group=%zz", "", "percent-encoded"},
		{"bad escape in unknown name", testGroupQ + "&fo%o=1", "", "percent-encoded"},
		{"truncated escape", testGroupQ + "&x=%4", "", "percent-encoded"},
		{"query too long", testGroupQ + "&pad=" + strings.Repeat("a", MaxQueryLength), "", "longer than 32768 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := parseListQuery(tt.raw)
			if err == nil {
				t.Fatalf("parseListQuery(%q) = %+v, want an error", tt.raw, q)
			}
			if code := dirgate.ErrorCode(err); code != dirgate.EINVALID {
				t.Errorf("code %q, want %q", code, dirgate.EINVALID)
			}
			if p := dirgate.ErrorParam(err); p != tt.wantParam {
				t.Errorf("param %q, want %q", p, tt.wantParam)
			}
			if msg := dirgate.ErrorMessage(err); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, tt.wantMsg)
			}
		})
	}
}

// TestQueryLimitsFit checks the claim on MaxQueryLength: requests whose values are at
// their own limits and fully percent-encoded still fit.
func TestQueryLimitsFit(t *testing.T) {
	id := "CN=" + strings.Repeat(",", dirgate.MaxIdentifierLength-3) // every byte but "CN" escaped
	full := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(s[i]), 16)))
		}
		return b.String()
	}
	props := strings.Repeat("a,", MaxPropertiesLength/2-1) + "a"
	list := "group=" + full(id) + "&includeIndirect=false&properties=" + full(props) + "&sizeLimit=" + strings.Repeat("9", MaxSizeLimitDigits)
	remove := "group=" + full(id) + "&member=" + full(id)
	for name, q := range map[string]string{"GET": list, "DELETE": remove} {
		if len(q) > MaxQueryLength {
			t.Errorf("%s query at the value limits is %d bytes, above MaxQueryLength %d", name, len(q), MaxQueryLength)
		}
		// The query passes the length checks: what fails is the content, per parameter.
		if _, err := parseParams(q, append(listParams, paramMember)); err != nil {
			t.Errorf("%s query at the value limits: %v", name, err)
		}
	}
}

func manyProps(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "a" + strconv.Itoa(i)
	}
	return strings.Join(p, ",")
}

func TestParseRemoveQuery(t *testing.T) {
	tests := []struct {
		name       string
		raw        string
		wantGroup  string
		wantMember string
		wantParam  string // "" for success
	}{
		{"DN and SID", testGroupQ + "&member=S-1-5-21-1-2-3-1105", testGroupDN, "S-1-5-21-1-2-3-1105", ""},
		// GET's parameters are unknown to DELETE and ignored, even when invalid.
		{"listing parameters ignored", "member=S-1-5-11&group=S-1-5-32-544&includeIndirect=maybe&sizeLimit=-1", "S-1-5-32-544", "S-1-5-11", ""},
		{"member missing", testGroupQ, "", "", "member"},
		{"group missing", "member=S-1-5-11", "", "", "group"},
		{"member invalid", testGroupQ + "&member=Bob", "", "", "member"},
		{"member repeated", testGroupQ + "&member=S-1-5-11&MEMBER=S-1-5-11", "", "", "member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := parseRemoveQuery(tt.raw)
			if tt.wantParam != "" {
				if err == nil || dirgate.ErrorParam(err) != tt.wantParam || dirgate.ErrorCode(err) != dirgate.EINVALID {
					t.Fatalf("parseRemoveQuery(%q) = %+v, %v; want an error naming %q", tt.raw, q, err, tt.wantParam)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRemoveQuery(%q): %v", tt.raw, err)
			}
			if q.Group.Canonical() != tt.wantGroup || q.Member.Canonical() != tt.wantMember {
				t.Errorf("got %q, %q; want %q, %q", q.Group.Canonical(), q.Member.Canonical(), tt.wantGroup, tt.wantMember)
			}
		})
	}
}

// FuzzParseListQuery: any raw query either fails with an EINVALID error or yields
// options within their documented bounds, and the same options come back from a
// query rebuilt from them.
func FuzzParseListQuery(f *testing.F) {
	for _, s := range []string{
		testGroupQ + "&includeIndirect=True&properties=mail,cn&sizeLimit=10",
		"GROUP=S-1-5-11&group=S-1-5-11", "group=%zz", "group=S-1-5-11&sizeLimit=%2B1",
		"group=%7B0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0%7D&properties=2.5.4.3", "group=CN%3Da;b&&x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseListQuery(raw)
		if err != nil {
			if dirgate.ErrorCode(err) != dirgate.EINVALID {
				t.Fatalf("parseListQuery(%q): code %q", raw, dirgate.ErrorCode(err))
			}
			if p := dirgate.ErrorParam(err); p != "" && !slices.Contains(listParams, p) {
				t.Fatalf("parseListQuery(%q) blames unknown parameter %q", raw, p)
			}
			return
		}
		o := q.Options
		if len(raw) > MaxQueryLength || q.Group.IsZero() || o.SizeLimit < 0 || o.SizeLimit > MaxSizeLimit || len(o.Properties) > dirgate.MaxProperties {
			t.Fatalf("parseListQuery(%q) = %+v", raw, q)
		}
		for i, p := range o.Properties {
			if p == "" || p != strings.ToLower(p) || (i > 0 && o.Properties[i-1] >= p) {
				t.Fatalf("parseListQuery(%q): properties %q not normalised", raw, o.Properties)
			}
		}
		v := url.Values{"group": {q.Group.String()}, "includeIndirect": {strconv.FormatBool(o.IncludeIndirect)}, "sizeLimit": {strconv.Itoa(o.SizeLimit)}}
		if len(o.Properties) > 0 {
			v.Set("properties", strings.Join(o.Properties, ","))
		}
		again, err := parseListQuery(v.Encode())
		if err != nil {
			t.Fatalf("rebuilt query %q of %q: %v", v.Encode(), raw, err)
		}
		if again.Group.Canonical() != q.Group.Canonical() || again.Options.IncludeIndirect != o.IncludeIndirect ||
			again.Options.SizeLimit != o.SizeLimit || !slices.Equal(again.Options.Properties, o.Properties) {
			t.Fatalf("rebuilt query of %q parses to %+v, want %+v", raw, again, q)
		}
	})
}
