package proxy

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/dirgate/dirgate"
)

// Limits on the query string, exported so that docs/api.md can cite them. Identifiers
// are bounded by dirgate.MaxIdentifierLength and property lists by
// dirgate.MaxProperties and dirgate.MaxPropertyNameLength as well.
const (
	// MaxQueryLength bounds the raw (still percent-encoded) query string in bytes. It
	// leaves room for a GET whose group and properties are at their limits with every
	// byte percent-encoded, and for a DELETE with two such identifiers.
	MaxQueryLength = 32 << 10
	// MaxPropertiesLength bounds the decoded properties value in bytes.
	MaxPropertiesLength = 4096
	// MaxSizeLimitDigits bounds the sizeLimit value's length.
	MaxSizeLimitDigits = 10
	// MaxSizeLimit is the largest sizeLimit accepted; 0 means no limit.
	MaxSizeLimit = 1_000_000
)

// Parameter names as docs/api.md spells them; they are matched without regard to ASCII
// letter case, as the product's web server does.
const (
	paramGroup           = "group"
	paramMember          = "member"
	paramIncludeIndirect = "includeIndirect"
	paramProperties      = "properties"
	paramSizeLimit       = "sizeLimit"
)

var (
	listParams   = []string{paramGroup, paramIncludeIndirect, paramProperties, paramSizeLimit}
	removeParams = []string{paramGroup, paramMember}
)

// maxValueLength bounds the decoded value of each parameter; includeIndirect needs no
// bound of its own because only "true" and "false" are accepted.
var maxValueLength = map[string]int{
	paramGroup:      dirgate.MaxIdentifierLength,
	paramMember:     dirgate.MaxIdentifierLength,
	paramProperties: MaxPropertiesLength,
	paramSizeLimit:  MaxSizeLimitDigits,
}

// listQuery is a validated GET query.
type listQuery struct {
	Group   dirgate.Identifier
	Options dirgate.ListOptions
}

// removeQuery is a validated DELETE query.
type removeQuery struct {
	Group, Member dirgate.Identifier
}

// parseListQuery validates the query of a listing (docs/api.md, "GET parameters").
func parseListQuery(raw string) (listQuery, error) {
	vals, err := parseParams(raw, listParams)
	if err != nil {
		return listQuery{}, err
	}
	return listQueryFrom(vals)
}

// listQueryFrom validates a listing's parameters, decoded by parseParams.
func listQueryFrom(vals map[string]string) (listQuery, error) {
	var q listQuery
	var err error
	if q.Group, err = requiredIdentifier(vals, paramGroup); err != nil {
		return listQuery{}, err
	}
	if v, ok := vals[paramIncludeIndirect]; ok {
		// docs/compatibility.md, "Requests": clients send "True"; the product accepts
		// any letter case.
		switch {
		case asciiEqualFold(v, "true"):
			q.Options.IncludeIndirect = true
		case asciiEqualFold(v, "false"):
		default:
			return listQuery{}, dirgate.InvalidParam(paramIncludeIndirect, "The includeIndirect parameter must be true or false.")
		}
	}
	if v, ok := vals[paramProperties]; ok {
		props, err := dirgate.NormalizeProperties(strings.Split(v, ","))
		if err != nil {
			return listQuery{}, dirgate.InvalidParam(paramProperties, "The properties parameter %s.", dirgate.ErrorMessage(err))
		}
		q.Options.Properties = props
	}
	if v, ok := vals[paramSizeLimit]; ok {
		if q.Options.SizeLimit, err = parseSizeLimit(v); err != nil {
			return listQuery{}, err
		}
	}
	return q, nil
}

// parseRemoveQuery validates the query of a removal (docs/api.md, "DELETE parameters").
func parseRemoveQuery(raw string) (removeQuery, error) {
	vals, err := parseParams(raw, removeParams)
	if err != nil {
		return removeQuery{}, err
	}
	var q removeQuery
	if q.Group, err = requiredIdentifier(vals, paramGroup); err != nil {
		return removeQuery{}, err
	}
	if q.Member, err = requiredIdentifier(vals, paramMember); err != nil {
		return removeQuery{}, err
	}
	return q, nil
}

// parseParams decodes raw and returns the values of the known parameters, keyed by
// their names in docs/api.md. Unknown parameters are ignored, but they must be
// validly encoded too. A known parameter given twice, under any letter case, is an
// error: which of the two values the client meant is unknowable. Unlike
// url.ParseQuery, a ";" is an ordinary character, as it is on the product's web
// server.
func parseParams(raw string, known []string) (map[string]string, error) {
	if len(raw) > MaxQueryLength {
		return nil, dirgate.Errorf(dirgate.EINVALID, "The query string is longer than %d bytes.", MaxQueryLength)
	}
	vals := make(map[string]string, len(known))
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, dirgate.Errorf(dirgate.EINVALID, "The query string is not validly percent-encoded.")
		}
		name, ok := knownName(key, known)
		if !ok {
			continue
		}
		if _, dup := vals[name]; dup {
			return nil, dirgate.InvalidParam(name, "The %s parameter is given more than once.", name)
		}
		if limit, ok := maxValueLength[name]; ok && len(val) > limit {
			return nil, dirgate.InvalidParam(name, "The %s parameter is longer than %d bytes.", name, limit)
		}
		vals[name] = val
	}
	return vals, nil
}

func knownName(key string, known []string) (string, bool) {
	for _, n := range known {
		if asciiEqualFold(key, n) {
			return n, true
		}
	}
	return "", false
}

func requiredIdentifier(vals map[string]string, name string) (dirgate.Identifier, error) {
	v, ok := vals[name]
	if !ok {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s parameter is required.", name)
	}
	id, err := identifiers.parse(v)
	if err != nil {
		return dirgate.Identifier{}, dirgate.InvalidParam(name, "The %s parameter %s.", name, dirgate.ErrorMessage(err))
	}
	return id, nil
}

// parseSizeLimit accepts 1 to MaxSizeLimitDigits decimal digits (leading zeros
// included) whose value is at most MaxSizeLimit. Signs and spaces are refused:
// strconv.Atoi alone would take "+5".
func parseSizeLimit(v string) (int, error) {
	if v == "" || len(v) > MaxSizeLimitDigits {
		return 0, dirgate.InvalidParam(paramSizeLimit, "The sizeLimit parameter must be a non-negative decimal integer.")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, dirgate.InvalidParam(paramSizeLimit, "The sizeLimit parameter must be a non-negative decimal integer.")
		}
	}
	n, err := strconv.ParseInt(v, 10, 64) // ten digits always fit
	if err != nil || n > MaxSizeLimit {
		return 0, dirgate.InvalidParam(paramSizeLimit, "The sizeLimit parameter must not exceed %d.", MaxSizeLimit)
	}
	return int(n), nil
}
