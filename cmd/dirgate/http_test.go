package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadiness(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(*readiness)
		wantStatus int
		wantBody   string
	}{
		// No checks yet: a started server is ready.
		{name: "empty", setup: func(*readiness) {}, wantStatus: 200, wantBody: `"status":"ready"`},
		// A shared dependency down is reported but keeps the pod in the Service, so
		// clients get dirgate's 503 or a stale listing rather than refused connections.
		{name: "non-gating failure", setup: func(rd *readiness) {
			rd.add("upstream", false, func(context.Context) error { return errors.New("circuit breaker open") })
		}, wantStatus: 200, wantBody: `"upstream":"circuit breaker open"`},
		{name: "gating failure", setup: func(rd *readiness) {
			rd.add("policy", true, func(context.Context) error { return errors.New("no policy loaded") })
		}, wantStatus: 503, wantBody: `"status":"not ready"`},
		{name: "draining", setup: func(rd *readiness) { rd.drain() }, wantStatus: 503, wantBody: `"status":"shutting down"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := &readiness{}
			tt.setup(rd)
			rec := httptest.NewRecorder()
			rd.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("got %d %s, want %d with %s", rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}
