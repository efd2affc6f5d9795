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
		{name: "failing check reported", setup: func(rd *readiness) {
			rd.add("upstream", func(context.Context) error { return errors.New("circuit breaker open") })
		}, wantStatus: 200, wantBody: `"upstream":"circuit breaker open"`},
		{name: "passing check reported", setup: func(rd *readiness) {
			rd.add("policy", func(context.Context) error { return nil })
		}, wantStatus: 200, wantBody: `"policy":"ok"`},
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
