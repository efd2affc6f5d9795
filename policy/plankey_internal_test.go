package policy

import (
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

// fullInput has every member a policy can see set, so that each can be changed.
func fullInput() Input {
	ts := dirgate.NewTimestamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	obj := func(s string) dirgate.Object {
		return dirgate.Object{GUID: s + "g", DN: "CN=" + s, DisplayName: s, ObjectType: dirgate.TypeUser, ObjectTypeCode: 1,
			DomainName: "x.test", DirectoryType: 2, Properties: map[string][]string{"mail": {s + "@x"}},
			AccountStatus:  &dirgate.AccountStatus{IsDisabled: true, ExpirationDate: ts},
			PasswordStatus: &dirgate.PasswordStatus{WhenChanged: ts, ExpirationStatus: 1, ExpirationDate: ts}}
	}
	o := obj("o")
	return Input{Action: ActionView,
		Subject: dirgate.Principal{DN: "CN=s", GUID: "sg", SID: "S-1", DisplayName: "s", DomainName: "s.test", Groups: []dirgate.GroupRef{{DN: "CN=g", GUID: "gg", SID: "S-2"}},
			AccountStatus: &dirgate.AccountStatus{IsLocked: true, ExpirationDate: ts}},
		Object: &o, Group: obj("grp"),
		Request: Request{IncludeIndirect: true, Properties: []string{"mail"}, SizeLimit: 3}}
}

// TestPlanKeyCoversEveryField: changing any member of the input that a policy can
// see (every JSON field of Input and of the types in it, found by reflection, so
// that a field added later is covered or fails here) changes the plan key; a field
// the policy cannot see (json:"-") does not need to.
func TestPlanKeyCoversEveryField(t *testing.T) {
	v := &version{}
	in := fullInput()
	base, err := v.planKey(in)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	check := func(path string) {
		n++
		k, err := v.planKey(in)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if k == base {
			t.Errorf("changing %s leaves the plan key unchanged", path)
		}
	}
	walkMutations(t, reflect.ValueOf(&in).Elem(), "input", check)
	if n < 40 {
		t.Fatalf("only %d changes tried: the walk missed fields", n)
	}
	if k, _ := v.planKey(fullInput()); k != base {
		t.Error("equal inputs have different plan keys")
	}
}

// walkMutations changes each leaf of v in turn, calls check, and restores it.
func walkMutations(t *testing.T, v reflect.Value, path string, check func(string)) {
	mutate := func(p string, set func()) {
		old := reflect.New(v.Type()).Elem()
		old.Set(v)
		set()
		check(p)
		v.Set(old)
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		mutate(path, func() { v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour))) })
		return
	}
	switch v.Kind() {
	case reflect.String:
		mutate(path, func() { v.SetString(v.String() + "x") })
	case reflect.Bool:
		mutate(path, func() { v.SetBool(!v.Bool()) })
	case reflect.Int:
		mutate(path, func() { v.SetInt(v.Int() + 1) })
	case reflect.Pointer:
		mutate(path+" (nil)", func() { v.Set(reflect.Zero(v.Type())) })
		walkMutations(t, v.Elem(), path, check)
	case reflect.Slice:
		mutate(path+" (nil)", func() { v.Set(reflect.Zero(v.Type())) })
		mutate(path+" (empty)", func() { v.Set(reflect.MakeSlice(v.Type(), 0, 0)) })
		mutate(path+" (longer)", func() { v.Set(reflect.Append(v, v.Index(0))) })
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		old := v.Interface()
		v.Set(c)
		walkMutations(t, c.Index(0), path+"[0]", check)
		v.Set(reflect.ValueOf(old))
	case reflect.Map:
		mutate(path+" (nil)", func() { v.Set(reflect.Zero(v.Type())) })
		for _, k := range v.MapKeys() {
			elem := v.MapIndex(k)
			mutate(path+" (key)", func() {
				m := reflect.MakeMap(v.Type())
				m.SetMapIndex(reflect.ValueOf(k.String()+"x"), elem)
				v.Set(m)
			})
			e := reflect.New(elem.Type()).Elem()
			e.Set(elem)
			walkMutations(t, e, path+"."+k.String(), func(p string) {
				m := reflect.MakeMap(v.Type())
				m.SetMapIndex(k, e)
				old := v.Interface()
				v.Set(m)
				check(p)
				v.Set(reflect.ValueOf(old))
			})
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			walkMutations(t, v.Field(i), path+"."+f.Name, check)
		}
	default:
		t.Fatalf("%s: a %s the walk does not know; teach it and planKey", path, v.Kind())
	}
}

func BenchmarkPlanKey(b *testing.B) {
	v := &version{}
	in := fullInput()
	in.Object = nil
	in.Group.AccountStatus, in.Group.PasswordStatus = nil, nil
	for i := range 20 {
		in.Subject.Groups = append(in.Subject.Groups, dirgate.GroupRef{DN: "CN=Group " + strings.Repeat("x", i) + ",OU=Groups,DC=example,DC=org", GUID: "0f8fad5b-d9cb-469f-a165-70867728950e", SID: "S-1-5-21-1004336348-1177238915-682003330-1234"})
	}
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.planKey(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) { // what planKey did before
		b.ReportAllocs()
		for b.Loop() {
			j, _ := json.Marshal(in)
			_ = sha256.Sum256(j)
		}
	})
}
