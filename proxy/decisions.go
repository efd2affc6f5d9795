package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dirgate/dirgate"
)

// DecisionsPath is the decisions API's resource below the base path
// (docs/policy.md, "The decisions API").
const DecisionsPath = "/api/policy/decisions"

// MaxDraftBodyLength bounds a POST to the decisions API: a JSON document holding
// one Rego module (the policy bounds the module itself more tightly).
const MaxDraftBodyLength = 256 << 10

// Decisions answers the decisions API: every decision on a group's unfiltered
// listing for one principal, under the active policy and the candidate or a draft.
// The answer is encoded as JSON as it is.
type Decisions interface {
	Decisions(ctx context.Context, caller dirgate.Principal, q DecisionsQuery) (any, error)
}

// DecisionsQuery is a validated decisions query.
type DecisionsQuery = dirgate.DecisionsQuery

const paramSubject = "subject"

var decisionsParams = []string{paramSubject, paramGroup, paramIncludeIndirect, paramProperties}

// parseDecisionsQuery validates a decisions query: the listing's parameters, no
// sizeLimit (every object is shown), and the explored subject.
func parseDecisionsQuery(raw string) (DecisionsQuery, error) {
	vals, err := parseParams(raw, decisionsParams)
	if err != nil {
		return DecisionsQuery{}, err
	}
	if len(vals[paramSubject]) > dirgate.MaxIdentifierLength {
		return DecisionsQuery{}, dirgate.InvalidParam(paramSubject, "The subject parameter is longer than %d bytes.", dirgate.MaxIdentifierLength)
	}
	var q DecisionsQuery
	if q.Subject, err = requiredIdentifier(vals, paramSubject); err != nil {
		return DecisionsQuery{}, err
	}
	// The listing's own rules check group, includeIndirect and properties.
	lq, err := listQueryFrom(vals)
	if err != nil {
		return DecisionsQuery{}, err
	}
	q.Group, q.Options = lq.Group, lq.Options
	return q, nil
}

// serveDecisions serves GET and POST {base}/api/policy/decisions, authenticated like
// the API; the policy decides whether the caller may explain (403 otherwise).
func (s *server) serveDecisions(w http.ResponseWriter, r *http.Request, rec *record) {
	// A body is read within BodyReadTimeout, as on the API's own resource
	// (serveGroupMembers): a client trickling a draft cannot hold the request open.
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		Error(w, r, dirgate.Errorf(dirgate.EMETHOD, "The method is not allowed on this resource; use GET or POST."))
		return
	}
	p, err := s.authenticate(w, r, rec)
	if err != nil {
		Error(w, r, err)
		return
	}
	rec.subject = p.DN
	q, err := parseDecisionsQuery(r.URL.RawQuery)
	if err != nil {
		Error(w, r, err)
		return
	}
	rec.group = q.Group.Canonical()
	if r.Method == http.MethodPost {
		if q.Draft, err = readDraft(r); err != nil {
			Error(w, r, err)
			return
		}
	} else if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		Error(w, r, dirgate.Errorf(dirgate.EINVALID, "The request must not have a body."))
		return
	}
	res, err := s.cfg.Decisions.Decisions(r.Context(), p, q)
	if err != nil {
		Error(w, r, fmt.Errorf("policy decisions: %w", err))
		return
	}
	writeOK(w, r, res)
}

// readDraft reads a POST's body, {"module": "<Rego>"}.
func readDraft(r *http.Request) (string, error) {
	if !isJSONContentType(r.Header.Values("Content-Type")) {
		return "", dirgate.Errorf(dirgate.EMEDIATYPE, "The request body must be JSON in UTF-8, sent with Content-Type: application/json.")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxDraftBodyLength+1))
	if err != nil {
		return "", dirgate.WrapError(dirgate.EINVALID, "The request body could not be read.", err)
	}
	if len(b) > MaxDraftBodyLength {
		return "", dirgate.Errorf(dirgate.ETOOLARGE, "The request body is longer than %d bytes.", MaxDraftBodyLength)
	}
	var body struct {
		Module *string `json:"module"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Module == nil || *body.Module == "" {
		return "", dirgate.InvalidParam("module", "The body must be a JSON object whose module member is a Rego module.")
	}
	return *body.Module, nil
}
