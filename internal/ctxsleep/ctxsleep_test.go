package ctxsleep_test

import (
	"context"
	"testing"
	"time"

	"github.com/dirgate/dirgate/internal/ctxsleep"
)

// TestSleepEndsWithTheContext: a delayed answer does not outlive its request.
func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { ctxsleep.Sleep(ctx, time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep ignored a cancelled context")
	}
}
