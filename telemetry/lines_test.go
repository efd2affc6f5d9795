package telemetry_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate/telemetry"
)

// recorder records each Write it receives; it can be made to fail.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// TestLineWriterBatches: lines written close together reach the destination in one
// write, within the interval, whole and in order; Flush and Close write what waits.
func TestLineWriterBatches(t *testing.T) {
	var rec recorder
	lw := telemetry.NewLineWriter(&rec, 20*time.Millisecond)
	for i := range 3 {
		fmt.Fprintf(lw, "line %d\n", i)
	}
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("written before the interval: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := rec.got(); len(got) != 1 || got[0] != "line 0\nline 1\nline 2\n" {
		t.Fatalf("writes %q: want the three lines in one write", got)
	}
	fmt.Fprintln(lw, "line 3")
	if err := lw.Flush(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(lw, "line 4")
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(lw, "line 5") // after Close: at once
	if got := strings.Join(rec.got(), "|"); got != "line 0\nline 1\nline 2\n|line 3\n|line 4\n|line 5\n" {
		t.Fatalf("writes %q", got)
	}
}

// TestLineWriterUnbatched: interval 0 writes every line at once.
func TestLineWriterUnbatched(t *testing.T) {
	var rec recorder
	lw := telemetry.NewLineWriter(&rec, 0)
	fmt.Fprintln(lw, "a")
	fmt.Fprintln(lw, "b")
	if got := rec.got(); len(got) != 2 {
		t.Fatalf("writes %q: want each line at once", got)
	}
}

// TestLineWriterLargeBatch: 64 KiB waiting are written without waiting for the timer.
func TestLineWriterLargeBatch(t *testing.T) {
	var rec recorder
	lw := telemetry.NewLineWriter(&rec, time.Hour)
	line := strings.Repeat("x", 1023) + "\n"
	for range 64 {
		if _, err := lw.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.got(); len(got) != 1 || len(got[0]) != 64*1024 {
		t.Fatalf("%d writes: want one of 64 KiB", len(got))
	}
	_ = lw.Close()
}

// TestLineWriterReportsFailure: a batch that failed to write makes the next Write
// fail, so that the decision log's "write failed" report still happens.
func TestLineWriterReportsFailure(t *testing.T) {
	rec := &recorder{fail: errors.New("disk full")}
	lw := telemetry.NewLineWriter(rec, time.Hour)
	fmt.Fprintln(lw, "lost")
	if err := lw.Flush(); err == nil {
		t.Fatal("Flush of a failing destination: no error")
	}
	fmt.Fprintln(lw, "queued")
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	if err := lw.Close(); err != nil {
		t.Fatalf("Close after recovery: %v", err)
	}
	lw2 := telemetry.NewLineWriter(&recorder{fail: errors.New("disk full")}, 5*time.Millisecond)
	fmt.Fprintln(lw2, "lost")
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(10 * time.Millisecond)
		if _, err := fmt.Fprintln(lw2, "next"); err != nil {
			break // the timer's failed batch is reported
		}
		if time.Now().After(deadline) {
			t.Fatal("a failed timed batch was never reported")
		}
	}
}

// TestLineWriterConcurrent: lines written from many goroutines arrive whole.
func TestLineWriterConcurrent(t *testing.T) {
	var rec recorder
	lw := telemetry.NewLineWriter(&rec, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(lw, "g%d-%03d %s\n", g, i, strings.Repeat("y", 300))
			}
		})
	}
	wg.Wait()
	_ = lw.Close()
	all := strings.Join(rec.got(), "")
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, l := range lines {
		if len(l) != 307 || !bytes.HasSuffix([]byte(l), []byte(strings.Repeat("y", 300))) {
			t.Fatalf("broken line %q", l)
		}
	}
}

// TestLineWriterWriteWaiting: the waiting lines are written at once, in one write,
// and a failure is kept for the next Write as a timed batch's is.
func TestLineWriterWriteWaiting(t *testing.T) {
	var rec recorder
	lw := telemetry.NewLineWriter(&rec, time.Hour)
	fmt.Fprintln(lw, "a")
	fmt.Fprintln(lw, "b")
	lw.WriteWaiting()
	if got := rec.got(); len(got) != 1 || got[0] != "a\nb\n" {
		t.Fatalf("writes %q: want both lines in one write", got)
	}
	lw.WriteWaiting() // nothing waits: nothing written
	if got := rec.got(); len(got) != 1 {
		t.Fatalf("writes %q after an empty WriteWaiting", got)
	}

	failing := &recorder{fail: errors.New("disk full")}
	lw = telemetry.NewLineWriter(failing, time.Hour)
	fmt.Fprintln(lw, "lost")
	lw.WriteWaiting()
	if _, err := fmt.Fprintln(lw, "next"); err == nil {
		t.Fatal("the failed batch was not reported by the next Write")
	}
}
