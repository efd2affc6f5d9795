package sambatest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stateHold is a test process's hold on a harness it may take down in part (a DC of
// the pair, a domain of the forest): an flock on STATE_DIR/lock, taken by the first
// test of this process that asks and released when the last one ends. go test runs
// packages in parallel; one package stopping a DC must not meet another package's
// test that needs it. Tests of one package share the hold; they must not call
// t.Parallel.
type stateHold struct {
	sync.Mutex
	count int
	file  *os.File
}

func (h *stateHold) take(t testing.TB, stateDir, what string) {
	t.Helper()
	h.Lock()
	defer h.Unlock()
	if h.count == 0 {
		f, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("sambatest: hold %s: %v", what, err)
		}
		start := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("sambatest: hold %s: flock: %v", what, err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("sambatest: waited %v for another package's test to release %s", waited.Round(time.Millisecond), what)
		}
		h.file = f
	}
	h.count++
	t.Cleanup(func() {
		h.Lock()
		defer h.Unlock()
		if h.count--; h.count == 0 {
			h.file.Close() // releases the flock
			h.file = nil
		}
	})
}
