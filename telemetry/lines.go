package telemetry

import (
	"io"
	"sync"
	"time"
)

// maxBatch is how many bytes of lines a LineWriter holds before it writes them at
// once, whatever the interval.
const maxBatch = 64 << 10

// LineWriter writes the lines written to it (each Write one or more whole lines, as
// slog handlers and the decision log write them) to w in batches: at most interval
// after the first line of a batch, or as soon as 64 KiB are waiting, and at Flush
// and Close. A busy server then makes one write system call per batch rather than
// per line; a line is never split or reordered. With interval 0 every line is
// written at once, as by w itself.
//
// A write error is returned by the next Write (and by Flush and Close), so that a
// caller that reports failed writes still learns of them; the batch that failed is
// dropped, as a failed unbatched write drops its line.
type LineWriter struct {
	mu       sync.Mutex
	w        io.Writer
	interval time.Duration
	buf      []byte
	err      error       // of the last batch written, not yet returned
	timer    *time.Timer // armed while a batch waits
	armed    bool
	closed   bool
}

// NewLineWriter returns a LineWriter batching lines to w.
func NewLineWriter(w io.Writer, interval time.Duration) *LineWriter {
	lw := &LineWriter{w: w, interval: interval}
	if interval > 0 {
		lw.timer = time.AfterFunc(time.Hour, func() {
			// The batch's error, if any, is kept for the next Write.
			lw.mu.Lock()
			defer lw.mu.Unlock()
			lw.flushLocked()
		})
		lw.timer.Stop()
	}
	return lw
}

// Write queues p, or writes it at once when batching is off or the writer closed.
func (lw *LineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if err := lw.takeErr(); err != nil {
		return 0, err
	}
	if lw.interval <= 0 || lw.closed {
		return lw.w.Write(p)
	}
	lw.buf = append(lw.buf, p...)
	if len(lw.buf) >= maxBatch {
		lw.flushLocked()
		return len(p), lw.takeErr()
	}
	if !lw.armed {
		lw.armed = true
		lw.timer.Reset(lw.interval)
	}
	return len(p), nil
}

// Flush writes the waiting lines now.
func (lw *LineWriter) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.flushLocked()
	return lw.takeErr()
}

// WriteWaiting writes the waiting lines now, as the interval's end would: an error
// is kept for the next Write. A server calls it when it has nothing else in flight,
// so that lines logged one request at a time are written at the end of their
// request instead of waking the process up an interval later (with one
// client, those wake-ups were much of a cached listing's cost beyond the bare
// server's).
func (lw *LineWriter) WriteWaiting() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.armed {
		lw.timer.Stop()
	}
	lw.flushLocked()
}

// Close writes the waiting lines and makes every later Write immediate. It does not
// close w.
func (lw *LineWriter) Close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.flushLocked()
	lw.closed = true
	if lw.timer != nil {
		lw.timer.Stop()
	}
	return lw.takeErr()
}

func (lw *LineWriter) flushLocked() {
	lw.armed = false
	if len(lw.buf) == 0 {
		return
	}
	if _, err := lw.w.Write(lw.buf); err != nil {
		lw.err = err
	}
	if cap(lw.buf) > 4*maxBatch {
		lw.buf = nil // a burst's buffer is not kept
	} else {
		lw.buf = lw.buf[:0]
	}
}

func (lw *LineWriter) takeErr() error {
	err := lw.err
	lw.err = nil
	return err
}
