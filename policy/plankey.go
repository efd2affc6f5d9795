package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/dirgate/dirgate"
)

// planKey names the plans that can decide in: the members of the input the policy
// reads (input.object aside, which the plan leaves unknown). Two inputs have the
// same key only if the policy sees the same document for them: the key is a SHA-256
// of every member the policy can see (each field of Input, in a fixed order, strings
// length-prefixed so that no two inputs encode alike). It was the hash of the
// input's JSON; encoding it by reflection cost a request about 8 µs. A field added to
// Input, Principal, GroupRef, Object or Request must be added here:
// TestPlanKeyCoversEveryField fails until it is.
func (v *version) planKey(in Input) (string, error) {
	if v.reads != nil {
		if !v.reads["action"] {
			in.Action = ""
		}
		if !v.reads["subject"] {
			in.Subject = dirgate.Principal{}
		}
		if !v.reads["group"] {
			in.Group = dirgate.Object{}
		}
		if !v.reads["request"] {
			in.Request = Request{}
		}
	}
	bp := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(bp)
	b, err := appendPlanInput((*bp)[:0], &in)
	if err != nil {
		return "", err
	}
	*bp = b[:0]
	sum := sha256.Sum256(b)
	return string(sum[:]), nil
}

var keyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendPlanInput appends the unambiguous encoding of in that planKey hashes.
func appendPlanInput(b []byte, in *Input) ([]byte, error) {
	b = appendKeyString(b, in.Action)
	s := &in.Subject
	b = appendKeyString(b, s.DN)
	b = appendKeyString(b, s.GUID)
	b = appendKeyString(b, s.SID)
	b = appendKeyString(b, s.DisplayName)
	b = appendKeyString(b, s.DomainName)
	b = appendKeyBool(b, s.Groups == nil) // null and [] are different documents
	b = binary.AppendUvarint(b, uint64(len(s.Groups)))
	for _, g := range s.Groups {
		b = appendKeyString(b, g.DN)
		b = appendKeyString(b, g.GUID)
		b = appendKeyString(b, g.SID)
	}
	b = appendKeyAccount(b, s.AccountStatus) // on every user caller: encoded without reflection
	b = appendKeyBool(b, in.Object != nil)
	var err error
	if in.Object != nil {
		if b, err = appendKeyObject(b, in.Object); err != nil {
			return nil, err
		}
	}
	if b, err = appendKeyObject(b, &in.Group); err != nil {
		return nil, err
	}
	r := &in.Request
	b = appendKeyBool(b, r.IncludeIndirect)
	b = appendKeyBool(b, r.Properties == nil)
	b = binary.AppendUvarint(b, uint64(len(r.Properties)))
	for _, p := range r.Properties {
		b = appendKeyString(b, p)
	}
	return binary.AppendVarint(b, int64(r.SizeLimit)), nil
}

// appendKeyObject encodes what a policy sees of o (its JSON members; SID and
// PrimaryGroupID are not among them).
func appendKeyObject(b []byte, o *dirgate.Object) ([]byte, error) {
	b = appendKeyString(b, o.GUID)
	b = appendKeyString(b, o.DN)
	b = appendKeyString(b, o.DisplayName)
	b = appendKeyString(b, o.ObjectType)
	b = binary.AppendVarint(b, int64(o.ObjectTypeCode))
	b = appendKeyString(b, o.DomainName)
	b = binary.AppendVarint(b, int64(o.DirectoryType))
	b = binary.AppendUvarint(b, uint64(len(o.Properties)))
	if len(o.Properties) > 0 {
		names := make([]string, 0, len(o.Properties))
		for name := range o.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			vals := o.Properties[name]
			b = appendKeyString(b, name)
			b = appendKeyBool(b, vals == nil)
			b = binary.AppendUvarint(b, uint64(len(vals)))
			for _, v := range vals {
				b = appendKeyString(b, v)
			}
		}
	}
	// Statuses are on users and computers, seldom on a group: encoded as the policy
	// sees them, by encoding/json.
	var err error
	if b, err = appendKeyJSON(b, o.AccountStatus != nil, o.AccountStatus); err != nil {
		return nil, err
	}
	if b, err = appendKeyJSON(b, o.PasswordStatus != nil, o.PasswordStatus); err != nil {
		return nil, err
	}
	return b, nil
}

// appendKeyAccount encodes an account status: presence, both flags, and the
// expiration date (presence, then the instant).
func appendKeyAccount(b []byte, a *dirgate.AccountStatus) []byte {
	b = appendKeyBool(b, a != nil)
	if a == nil {
		return b
	}
	b = appendKeyBool(b, a.IsDisabled)
	b = appendKeyBool(b, a.IsLocked)
	b = appendKeyBool(b, a.ExpirationDate != nil)
	if a.ExpirationDate != nil {
		b = binary.AppendVarint(b, a.ExpirationDate.Unix())
		b = binary.AppendVarint(b, int64(a.ExpirationDate.Nanosecond()))
	}
	return b
}

func appendKeyJSON(b []byte, present bool, v any) ([]byte, error) {
	b = appendKeyBool(b, present)
	if !present {
		return b, nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode policy input: %w", err)
	}
	return appendKeyString(b, string(j)), nil
}

func appendKeyString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendKeyBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}
