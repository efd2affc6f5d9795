package ldap

import (
	"context"
	"testing"
	"time"
)

func TestRefusalTimes(t *testing.T) {
	var r refusalTimes
	if got := r.target(); got != refusalFloor {
		t.Fatalf("target with no samples = %v, want the floor %v", got, refusalFloor)
	}
	for i := range 100 { // more than the ring holds: the oldest go
		r.record(time.Duration(i) * time.Millisecond)
	}
	for range 1000 {
		if got := r.target(); got < 36*time.Millisecond || got > 99*time.Millisecond {
			t.Fatalf("target %v is not one of the last 64 samples (36-99 ms)", got)
		}
	}

	var one refusalTimes
	one.record(80 * time.Millisecond)
	start := time.Now()
	one.wait(context.Background(), start)
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Fatalf("waited %v, want at least 80 ms", el)
	}
	// A refusal that already took longer is not held.
	start = time.Now()
	one.wait(context.Background(), start.Add(-time.Second))
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Fatalf("held a refusal that was already late for %v", el)
	}
	// Nor beyond the request's end.
	var long refusalTimes
	long.record(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	long.wait(ctx, start)
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("waited %v past the context", el)
	}
}
