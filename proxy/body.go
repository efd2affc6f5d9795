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
	// BodyReadTimeout bounds the time a client may take to send the body once its
	// headers have arrived, so that a slow sender cannot hold a request open.
	BodyReadTimeout = 10 * time.Second
)

// Field names of the addition's body (compat.md), matched without regard to ASCII
// letter case, as the product's JSON binding matches them.
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
// bytes within BodyReadTimeout. It reads nothing when the type is wrong or the
// declared length is over the bound.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if !isJSONContentType(r.Header.Values("Content-Type")) {
		return nil, dirgate.Errorf(dirgate.EMEDIATYPE, "The request body must be JSON in UTF-8, sent with Content-Type: application/json.")
	}
	if r.ContentLength > MaxBodyLength {
		return nil, dirgate.Errorf(dirgate.ETOOLARGE, "The request body is longer than %d bytes.", MaxBodyLength)
	}
	// A writer that cannot set deadlines (a test recorder) just reads without one.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(BodyReadTimeout))
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
// A leading UTF-8 byte order mark is skipped.
func parseAddBody(b []byte) (addBody, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(b) {
		return addBody{}, dirgate.InvalidParam(fieldBody, "The request body is not valid UTF-8.")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return addBody{}, dirgate.InvalidParam(fieldBody, "The request body is empty; it must be a JSON object with group and newMember.")
		}
		return addBody{}, malformed()
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return addBody{}, dirgate.InvalidParam(fieldBody, "The request body must be a JSON object with group and newMember.")
	}
	vals := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return addBody{}, malformed()
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return addBody{}, malformed()
		}
		name, known := knownName(key, []string{fieldGroup, fieldNewMember})
		if !known {
			continue
		}
		if _, dup := vals[name]; dup {
			return addBody{}, dirgate.InvalidParam(name, "The %s field is given more than once.", name)
		}
		v, err := stringField(name, raw)
		if err != nil {
			return addBody{}, err
		}
		vals[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return addBody{}, malformed()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return addBody{}, dirgate.InvalidParam(fieldBody, "The request body must hold one JSON object and nothing after it.")
	}
	var out addBody
	if out.Group, err = bodyIdentifier(vals, fieldGroup); err != nil {
		return addBody{}, err
	}
	if out.NewMember, err = bodyIdentifier(vals, fieldNewMember); err != nil {
		return addBody{}, err
	}
	return out, nil
}

func malformed() error {
	return dirgate.InvalidParam(fieldBody, "The request body is not valid JSON.")
}

// stringField decodes a field's value, which must be a string (null counts as
// missing). encoding/json turns an unpaired \ud800-style escape into U+FFFD without
// an error; such a value is refused rather than silently altered, so every U+FFFD
// in the result must have been in the body, literally or as \ufffd.
func stringField(name string, raw json.RawMessage) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", dirgate.InvalidParam(name, "The %s field must be a string.", name)
	}
	if n := strings.Count(s, "\uFFFD"); n > 0 {
		given := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
		if n != given {
			return "", dirgate.InvalidParam(name, "The %s field contains an invalid \\u escape.", name)
		}
	}
	if len(s) > dirgate.MaxIdentifierLength {
		return "", dirgate.InvalidParam(name, "The %s field is longer than %d bytes.", name, dirgate.MaxIdentifierLength)
	}
	return s, nil
}

func bodyIdentifier(vals map[string]string, name string) (dirgate.Identifier, error) {
	v := vals[name]
	if v == "" {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s field is required.", name)
	}
	id, err := dirgate.ParseIdentifier(v)
	if err != nil {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s field %s.", name, dirgate.ErrorMessage(err))
	}
	return id, nil
}
