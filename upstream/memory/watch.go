package memory

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/dirgate/dirgate"
)

// The memory upstream's change source: the LDIF file is checked on every read of the
// change feed (about once a second); a file that changed is loaded again and, when it
// loads, replaces the directory whole and invalidates everything cached (a resync with
// reason "reloaded"). A file that does not load leaves the previous directory serving
// and is reported as the read's error (the feed logs it and tries again).

var _ dirgate.ChangeSource = (*Directory)(nil)

// watchState is the file behind a directory; empty for the embedded demo.
type watchState struct {
	mu     sync.Mutex
	path   string
	loaded fileStat // what the directory was loaded from
	gen    uint64   // loads since Open
}

// fileStat is what tells that a file changed without reading it. os.Stat follows
// symbolic links, so Kubernetes' swap of a mounted ConfigMap is seen too.
type fileStat struct {
	size    int64
	modTime time.Time
	ino     string
}

func stat(path string) (fileStat, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: fi.Size(), modTime: fi.ModTime(), ino: inode(fi)}, nil
}

// ReadChanges implements dirgate.ChangeSource: a reloaded file is a resync.
func (d *Directory) ReadChanges(ctx context.Context, pos dirgate.ChangePosition, _ int) (dirgate.ChangeBatch, error) {
	if err := ctx.Err(); err != nil {
		return dirgate.ChangeBatch{}, err
	}
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.path != "" {
		if err := d.reloadIfChanged(); err != nil {
			return dirgate.ChangeBatch{}, err
		}
	}
	b := dirgate.ChangeBatch{Position: dirgate.ChangePosition{Source: "memory|" + w.path, USN: w.gen, Time: d.now()}}
	switch {
	case pos.Source == "":
		b.Resync = dirgate.ResyncNoPosition
	case pos.Source != b.Position.Source:
		b.Resync = dirgate.ResyncServerChanged
	case pos.USN != w.gen:
		b.Resync, b.Detail = dirgate.ResyncReloaded, "reloaded "+w.path+" (load "+strconv.FormatUint(w.gen, 10)+")"
	}
	return b, nil
}

// reloadIfChanged loads the file again if it changed since it was loaded.
func (d *Directory) reloadIfChanged() error {
	w := &d.watch
	st, err := stat(w.path)
	if err != nil {
		return fmt.Errorf("memory: watch: %w", err)
	}
	if st == w.loaded {
		return nil
	}
	nd, err := loadFile(w.path, WithClock(d.now))
	if err != nil {
		return fmt.Errorf("memory: reload (the previous directory keeps serving): %w", err)
	}
	// The DN-valued attributes only grow: a listing cached from the previous file
	// may still hold values of an attribute that names objects there only.
	d.dnAttrs.Store(unionOf(d.dnAttrs.Load(), nd.dnAttrs.Load()))
	d.mu.Lock()
	d.records, d.byKey, d.byGUID, d.bySID, d.byPrimary = nd.records, nd.byKey, nd.byGUID, nd.bySID, nd.byPrimary
	d.mu.Unlock()
	releaseLoadGarbage() // the load's and the previous directory's
	w.loaded = st
	w.gen++
	return nil
}
