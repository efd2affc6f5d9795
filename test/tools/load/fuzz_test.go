package load

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dirgate/dirgate"
)

// fuzzListing is the expected listing of the fuzz tests: two objects, one with
// properties, in listing order.
func fuzzListing() []dirgate.Object {
	return []dirgate.Object{
		{GUID: "00000000-0000-0000-0000-000000000001", DN: "CN=A,DC=x", DisplayName: "A", ObjectType: "user",
			Properties: map[string][]string{"mail": {"a@x"}}},
		{GUID: "00000000-0000-0000-0000-000000000002", DN: "CN=B,DC=x", DisplayName: "B", ObjectType: "group",
			Properties: map[string][]string{}},
	}
}

// A body from the server under test is untrusted: whatever it is, the checker must
// not fail, and must accept it only if it is, as JSON, the expected listing in one
// of the states asked for.
func FuzzCheckListing(f *testing.F) {
	want := fuzzListing()
	right, _ := json.Marshal(want)
	withoutA, _ := json.Marshal(want[1:])
	for _, seed := range []string{string(right), string(withoutA), "[]", "null", "{}", "[1]", `[{"dn":"CN=A,DC=x"}]`, ""} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, removed bool) {
		c := NewChecker()
		q := Query{Group: "CN=G,DC=x"}
		if err := c.SetListing(0, q, want); err != nil {
			t.Fatal(err)
		}
		states := []string{""}
		if removed {
			states = append(states, dnKey("CN=A,DC=x"))
		}
		if c.CheckListing(0, q, states, body) != "" {
			return
		}
		var got, full, part any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		json.Unmarshal(right, &full)
		json.Unmarshal(withoutA, &part)
		if !reflect.DeepEqual(got, full) && !(removed && reflect.DeepEqual(got, part)) {
			t.Fatalf("accepted %q", body)
		}
		// A body accepted once is remembered; it must be accepted again.
		if d := c.CheckListing(0, q, states, body); d != "" {
			t.Fatalf("accepted %q once, then: %s", body, d)
		}
	})
}

// A removal's or an addition's answer is untrusted too: only success with a change
// is right.
func FuzzCheckChange(f *testing.F) {
	for _, seed := range []string{
		`{"resultType":0,"innerMessages":[],"exception":null,"actualObjectDN":"x","noChanges":false,"extraInfo":{}}`,
		`{"resultType":0,"noChanges":true}`, `{"resultType":2,"noChanges":false}`, `{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkChange("remove", body) != "" {
			return
		}
		var res struct {
			ResultType json.Number `json:"resultType"`
			NoChanges  bool        `json:"noChanges"`
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&res); err != nil || res.ResultType.String() == "" || res.NoChanges {
			t.Fatalf("accepted %q", body)
		}
	})
}
