package lazyctx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type key struct{}

func TestErrWithoutDone(t *testing.T) {
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx, cancel := WithTimeout(parent, 20*time.Millisecond)
	defer cancel()
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
		t.Fatalf("Deadline: %v %v", d, ok)
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	if ctx.(*lazy).real.Load() != nil {
		t.Fatal("Err and Value made the standard context")
	}
	time.Sleep(30 * time.Millisecond)
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", err)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done is open although Err reported the deadline")
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("the parent's value is lost once made")
	}
}

func TestDoneAtTheDeadline(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Err %v, Cause %v", ctx.Err(), context.Cause(ctx))
	}
}

func TestCancel(t *testing.T) {
	for _, doneFirst := range []bool{false, true} {
		ctx, cancel := WithTimeout(context.Background(), time.Hour)
		var done <-chan struct{}
		if doneFirst {
			done = ctx.Done()
		}
		cancel()
		if done == nil {
			done = ctx.Done()
		}
		select {
		case <-done:
		default:
			t.Fatalf("doneFirst=%v: Done open after cancel", doneFirst)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("doneFirst=%v: Err %v after cancel", doneFirst, ctx.Err())
		}
		cancel() // a second call is harmless, as with the standard one
	}
}

func TestCanceledWithoutDone(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), time.Hour)
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err %v after cancel", ctx.Err())
	}
}

func TestParentCanceled(t *testing.T) {
	parent, cancelParent := context.WithCancelCause(context.Background())
	ctx, cancel := WithTimeout(parent, time.Hour)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx) // waits on ctx: makes the standard one
	defer cancelChild()
	cause := errors.New("client went away")
	cancelParent(cause)
	for _, c := range []context.Context{ctx, child} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the parent's cancellation did not reach the context or its child")
		}
		if !errors.Is(c.Err(), context.Canceled) || context.Cause(c) != cause {
			t.Fatalf("Err %v, Cause %v", c.Err(), context.Cause(c))
		}
	}
	// And without anything waiting first.
	parent2, cancelParent2 := context.WithCancel(context.Background())
	ctx2, cancel2 := WithTimeout(parent2, time.Hour)
	defer cancel2()
	cancelParent2()
	if !errors.Is(ctx2.Err(), context.Canceled) {
		t.Fatalf("Err %v after the parent's cancellation", ctx2.Err())
	}
}

func TestEarlierParentDeadline(t *testing.T) {
	parent, cancelParent := context.WithTimeout(context.Background(), time.Minute)
	defer cancelParent()
	pd, _ := parent.Deadline()
	ctx, cancel := WithTimeout(parent, time.Hour)
	defer cancel()
	if d, _ := ctx.Deadline(); !d.Equal(pd) {
		t.Fatalf("Deadline %v, the parent's is %v", d, pd)
	}
}

func TestChildCancelledWithIt(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), time.Hour)
	child, cancelChild := context.WithTimeout(ctx, 2*time.Hour)
	defer cancelChild()
	if d, _ := child.Deadline(); time.Until(d) > time.Hour {
		t.Fatalf("the child's deadline %v is past its parent's", d)
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not reach the child")
	}
}

// TestConcurrentDoneAndCancel runs Done, Err and cancel at once (under -race in
// make test): whichever comes first, the context ends canceled.
func TestConcurrentDoneAndCancel(t *testing.T) {
	for range 200 {
		ctx, cancel := WithTimeout(context.Background(), time.Hour)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { <-ctx.Done() })
		}
		wg.Go(func() { _ = ctx.Err() })
		wg.Go(cancel)
		wg.Wait()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err %v", ctx.Err())
		}
	}
}

func BenchmarkWithTimeout(b *testing.B) {
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	b.Run("lazy", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := WithTimeout(parent, time.Minute)
			_ = ctx.Err()
			cancel()
		}
	})
	b.Run("standard", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := context.WithTimeout(parent, time.Minute)
			_ = ctx.Err()
			cancel()
		}
	})
}
