package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dirgate/dirgate"
)

// Limits on the body of a POST, exported so that docs/api.md can cite them.
const (
	// MaxBodyLength bounds the body of an addition in bytes. It leaves room for two
	// identifiers at dirgate.MaxIdentifierLength with every byte written as a \u
	// escape (6 bytes each), and for a few unknown fields besides.
	MaxBodyLength = 32 << 10
	// DefaultBodyReadTimeout bounds the time a client may take to send a body once
	// its headers have arrived (Config.BodyReadTimeout), so that a slow sender cannot
	// hold a request open.
	DefaultBodyReadTimeout = 10 * time.Second
)

// Field names of the addition's body (docs/compatibility.md, "Adding a member"),
// matched without regard to ASCII letter case, as the product's JSON binding matches
// them.
const (
	fieldGroup     = "group"
	fieldNewMember = "newMember"
	// fieldBody names the body as a whole in modelState.
	fieldBody = "body"
)

// addBody is a validated addition.
type addBody struct {
	Group, NewMember dirgate.Identifier
}

// readJSONBody checks the Content-Type and reads a body of at most MaxBodyLength
// bytes (within the read deadline serveGroupMembers set). It reads nothing when the
// type is wrong or the declared length is over the bound.
func readJSONBody(r *http.Request) ([]byte, error) {
	if !isJSONContentType(r.Header.Values("Content-Type")) {
		return nil, dirgate.Errorf(dirgate.EMEDIATYPE, "The request body must be JSON in UTF-8, sent with Content-Type: application/json.")
	}
	if r.ContentLength > MaxBodyLength {
		return nil, dirgate.Errorf(dirgate.ETOOLARGE, "The request body is longer than %d bytes.", MaxBodyLength)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyLength+1))
	if err != nil {
		return nil, dirgate.WrapError(dirgate.EINVALID, "The request body could not be read.", err)
	}
	if len(b) > MaxBodyLength {
		return nil, dirgate.Errorf(dirgate.ETOOLARGE, "The request body is longer than %d bytes.", MaxBodyLength)
	}
	return b, nil
}

// isJSONContentType accepts exactly one Content-Type, application/json (or text/json,
// which the product's JSON formatter takes too), with no charset or charset=utf-8.
func isJSONContentType(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || (mt != "application/json" && mt != "text/json") {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	return true
}

// parseAddBody validates the body of an addition: one JSON object whose fields group
// and newMember are non-empty strings naming a DN, GUID or SID. Field names match
// without regard to ASCII letter case; a field given twice is refused, as a
// parameter given twice is; other fields are ignored, as the product ignores them.
// A leading UTF-8 byte order mark is skipped. The body as a whole is checked first,
// so that a broken body is reported as such, never as one of its fields.
func parseAddBody(b []byte) (addBody, error) {
	raws, err := parseObject(b, []string{fieldGroup, fieldNewMember}, "a JSON object with group and newMember")
	if err != nil {
		return addBody{}, err
	}
	var out addBody
	if out.Group, err = bodyIdentifier(raws, fieldGroup); err != nil {
		return addBody{}, err
	}
	if out.NewMember, err = bodyIdentifier(raws, fieldNewMember); err != nil {
		return addBody{}, err
	}
	return out, nil
}

// parseObject checks that b is one JSON object (after an optional UTF-8 byte order
// mark) and returns the raw values of the fields named in known, by their names
// there. Names match without regard to ASCII letter case; a known field given twice
// is refused; other fields are ignored. shape says what the body must be ("a JSON
// object with …") in the messages. Every body parser of the API shares it (POST groupMembers,
// the sign-in bodies), so that they judge broken bodies alike.
func parseObject(b []byte, known []string, shape string) (map[string]json.RawMessage, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(b) {
		return nil, dirgate.InvalidParam(fieldBody, "The request body is not valid UTF-8.")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, dirgate.InvalidParam(fieldBody, "The request body is empty; it must be %s.", shape)
		}
		return nil, malformed()
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, dirgate.InvalidParam(fieldBody, "The request body must be %s.", shape)
	}
	raws := map[string]json.RawMessage{}
	dup := ""
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed()
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed()
		}
		name, ok := knownName(key, known)
		if !ok {
			continue
		}
		if _, seen := raws[name]; seen && dup == "" {
			dup = name
		}
		raws[name] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, malformed()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, dirgate.InvalidParam(fieldBody, "The request body must hold one JSON object and nothing after it.")
	}
	if dup != "" {
		return nil, dirgate.InvalidParam(dup, "The %s field is given more than once.", dup)
	}
	return raws, nil
}

func malformed() error {
	return dirgate.InvalidParam(fieldBody, "The request body is not valid JSON.")
}

// stringField decodes a field's value, which must be a string (null counts as
// missing). encoding/json turns an unpaired UTF-16 surrogate escape (\ud800) into
// U+FFFD without an error; such a value is refused rather than silently altered.
func stringField(name string, raw json.RawMessage) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", dirgate.InvalidParam(name, "The %s field must be a string.", name)
	}
	if !validSurrogates(raw) {
		return "", dirgate.InvalidParam(name, "The %s field contains an invalid \\u escape.", name)
	}
	if len(s) > dirgate.MaxIdentifierLength {
		return "", dirgate.InvalidParam(name, "The %s field is longer than %d bytes.", name, dirgate.MaxIdentifierLength)
	}
	return s, nil
}

// validSurrogates walks the escapes of a JSON string literal that encoding/json has
// accepted and reports whether every \u escape of a UTF-16 surrogate is a high one
// followed at once by a low one, the only form that stands for a character.
func validSurrogates(lit []byte) bool {
	unit := func(i int) (rune, bool) { // the \uXXXX escape at lit[i], if there is one
		if i+6 > len(lit) || lit[i] != '\\' || lit[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range lit[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		r, ok := unit(i)
		switch {
		case !ok:
			i++ // a two-byte escape such as \\ or \n: skip its second byte
		case 0xDC00 <= r && r <= 0xDFFF:
			return false // a low surrogate without a high one before it
		case 0xD800 <= r && r <= 0xDBFF:
			if lo, ok := unit(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

func bodyIdentifier(raws map[string]json.RawMessage, name string) (dirgate.Identifier, error) {
	var v string
	if raw, ok := raws[name]; ok {
		var err error
		if v, err = stringField(name, raw); err != nil {
			return dirgate.Identifier{}, err
		}
	}
	if v == "" {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s field is required.", name)
	}
	id, err := dirgate.ParseIdentifier(v)
	if err != nil {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s field %s.", name, dirgate.ErrorMessage(err))
	}
	return id, nil
}
