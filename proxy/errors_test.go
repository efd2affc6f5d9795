package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/proxy"
)

func TestErrorStatusCode(t *testing.T) {
	tests := []struct {
		code string
		want int
	}{
		{dirgate.EINVALID, 400},
		{dirgate.EUNAUTHENTICATED, 401},
		{dirgate.EFORBIDDEN, 403},
		{dirgate.ENOTFOUND, 404},
		{dirgate.EMETHOD, 405},
		{dirgate.ETOOMANY, 429},
		{dirgate.EINTERNAL, 500},
		// caddy's statusError: a failed upstream is 502, a slow one 504, an open
		// breaker 503.
		{dirgate.EUPSTREAM, 502},
		{dirgate.EUNAVAILABLE, 503},
		{dirgate.ETIMEOUT, 504},
		// An unknown code is a bug: 500, never a 2xx.
		{"made-up", 500},
		{"", 500},
		// ECANCELED has no status: nothing is written (see TestErrorCanceled).
		{dirgate.ECANCELED, 500},
	}
	for _, tt := range tests {
		if got := proxy.ErrorStatusCode(tt.code); got != tt.want {
			t.Errorf("ErrorStatusCode(%q) = %d, want %d", tt.code, got, tt.want)
		}
	}
}

// secret is text that must never reach a client.
const secret = "ldap://10.0.0.5:389 bind CN=svc,DC=corp password=hunter2"

func TestError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantBody   proxy.ErrorResponse
	}{
		// A 400 naming a parameter carries modelState with the same message.
		{"invalid param", dirgate.InvalidParam("group", "The group parameter is required."), 400,
			proxy.ErrorResponse{Message: "The group parameter is required.", Code: "invalid", ModelState: map[string][]string{"group": {"The group parameter is required."}}}},
		{"invalid without param", dirgate.Errorf(dirgate.EINVALID, "The request must not have a body."), 400,
			proxy.ErrorResponse{Message: "The request must not have a body.", Code: "invalid"}},
		// docs/compatibility.md, "Error bodies": the exact message and code, whatever
		// the authenticator said.
		{"unauthenticated", fmt.Errorf("authenticate: %w", dirgate.Errorf(dirgate.EUNAUTHENTICATED, "token %s revoked", secret)), 401,
			proxy.ErrorResponse{Message: "The provided authentication token is either expired or invalid.", Code: "unauthenticated"}},
		{"forbidden", dirgate.Errorf(dirgate.EFORBIDDEN, "You may not remove members from this group."), 403,
			proxy.ErrorResponse{Message: "You may not remove members from this group.", Code: "forbidden"}},
		// modelState belongs to 400s only, even when the error names a parameter.
		{"not found with param", &dirgate.Error{Code: dirgate.ENOTFOUND, Param: "member", Message: "The member was not found.", Err: errors.New(secret)}, 404,
			proxy.ErrorResponse{Message: "The member was not found.", Code: "notFound"}},
		// A coded error without a message still gets a meaningful one.
		{"not found without message", &dirgate.Error{Code: dirgate.ENOTFOUND}, 404,
			proxy.ErrorResponse{Message: "The object was not found.", Code: "notFound"}},
		{"too many", dirgate.Errorf(dirgate.ETOOMANY, "Slow down."), 429,
			proxy.ErrorResponse{Message: "Slow down.", Code: "tooManyRequests"}},
		// Uncoded errors are internal; their text stays in the log.
		{"plain error", errors.New(secret), 500,
			proxy.ErrorResponse{Message: "An internal error occurred.", Code: "internal"}},
		// A 5xx shows its code's generic text even if an adapter put detail in Message.
		{"upstream with leaky message", fmt.Errorf("list: %w", dirgate.WrapError(dirgate.EUPSTREAM, "LDAP "+secret, errors.New(secret))), 502,
			proxy.ErrorResponse{Message: "The directory could not complete the request.", Code: "upstreamError"}},
		{"breaker open", dirgate.Errorf(dirgate.EUNAVAILABLE, "breaker open"), 503,
			proxy.ErrorResponse{Message: "The directory is unavailable; try again later.", Code: "upstreamUnavailable"}},
		// An uncoded deadline is classified by dirgate.ErrorCode as a timeout.
		{"deadline", fmt.Errorf("search: %w", context.DeadlineExceeded), 504,
			proxy.ErrorResponse{Message: "The directory did not answer in time.", Code: "upstreamTimeout"}},
		// An unknown code is rendered as internal, never leaked as a code.
		{"unknown code", dirgate.Errorf("weird", "%s", secret), 500,
			proxy.ErrorResponse{Message: "An internal error occurred.", Code: "internal"}},
		// A cancellation while the client is still connected was not the client's doing.
		{"canceled, client still there", fmt.Errorf("x: %w", context.Canceled), 500,
			proxy.ErrorResponse{Message: "An internal error occurred.", Code: "internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			proxy.Error(w, httptest.NewRequest("GET", "/x", nil), tt.err)
			if w.Code != tt.wantStatus {
				t.Errorf("status %d, want %d", w.Code, tt.wantStatus)
			}
			got := errorBody(t, w)
			if got.Message != tt.wantBody.Message || got.Code != tt.wantBody.Code || fmt.Sprint(got.ModelState) != fmt.Sprint(tt.wantBody.ModelState) {
				t.Errorf("body %+v, want %+v", got, tt.wantBody)
			}
			if strings.Contains(w.Body.String(), "hunter2") {
				t.Errorf("body leaks internal text: %s", w.Body.String())
			}
			if tt.wantBody.ModelState == nil && strings.Contains(w.Body.String(), "modelState") {
				t.Errorf("body has modelState: %s", w.Body.String())
			}
		})
	}
}

// TestErrorCanceled: when the client went away nothing is written at all.
func TestErrorCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	proxy.Error(w, httptest.NewRequest("GET", "/x", nil).WithContext(ctx), fmt.Errorf("list: %w", context.Canceled))
	if w.Body.Len() != 0 || len(w.Header()) != 0 || w.Flushed {
		t.Errorf("wrote a response: headers %v body %q", w.Header(), w.Body.String())
	}
	if w.Result().StatusCode != http.StatusOK { // the recorder's default: WriteHeader never called
		t.Errorf("WriteHeader was called with %d", w.Code)
	}
}
