package opaconfig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/storage"
)

// snapshot is the policy the bundles hold, in the layout of a policy directory:
// each module at its path, the data in data.json, and the bundles' revisions in
// .manifest (so that dirgate's revision changes with them). testing/fstest's
// MapFS is the in-memory fs.FS of the standard library; nothing else of it is
// used.
type snapshot struct {
	files fstest.MapFS
	// key identifies the content, to deliver only what changed.
	key string
}

// readSnapshot reads what OPA's bundle plugin activated into the store: every
// module and the data, without the plugin's own records (data.system.bundles).
func readSnapshot(ctx context.Context, store storage.Store, revisions map[string]string) (*snapshot, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, fmt.Errorf("read bundles: %w", err)
	}
	defer store.Abort(ctx, txn)
	ids, err := store.ListPolicies(ctx, txn)
	if err != nil {
		return nil, fmt.Errorf("read bundles: %w", err)
	}
	files := fstest.MapFS{}
	for _, id := range ids {
		raw, err := store.GetPolicy(ctx, txn, id)
		if err != nil {
			return nil, fmt.Errorf("read bundles: module %s: %w", id, err)
		}
		files[modulePath(id)] = &fstest.MapFile{Data: raw, Mode: 0o444}
	}
	data, err := store.Read(ctx, txn, storage.RootPath)
	if err != nil {
		return nil, fmt.Errorf("read bundles: data: %w", err)
	}
	if m, ok := data.(map[string]any); ok {
		if sys, ok := m["system"].(map[string]any); ok {
			// A copy: the store's own map is not to be altered.
			rest := make(map[string]any, len(sys))
			for k, v := range sys {
				if k != "bundles" {
					rest[k] = v
				}
			}
			cp := make(map[string]any, len(m))
			for k, v := range m {
				cp[k] = v
			}
			if len(rest) == 0 {
				delete(cp, "system")
			} else {
				cp["system"] = rest
			}
			data = cp
		}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("read bundles: data: %w", err)
	}
	files["data.json"] = &fstest.MapFile{Data: b, Mode: 0o444}
	names := make([]string, 0, len(revisions))
	for n := range revisions {
		names = append(names, n)
	}
	sort.Strings(names)
	var rev []string
	for _, n := range names {
		rev = append(rev, n+"@"+revisions[n])
	}
	mf, err := json.Marshal(map[string]any{"revision": strings.Join(rev, ",")})
	if err != nil {
		return nil, fmt.Errorf("read bundles: %w", err)
	}
	files[".manifest"] = &fstest.MapFile{Data: mf, Mode: 0o444}
	return &snapshot{files: files, key: keyOf(files)}, nil
}

// modulePath turns a store's policy id (the bundle's name and the module's path
// in it) into a path of the snapshot.
func modulePath(id string) string {
	p := path.Clean("/" + id)[1:]
	if !fs.ValidPath(p) || p == "" || p == "." {
		p = "module"
	}
	if p == "data.json" || p == ".manifest" || !strings.HasSuffix(p, ".rego") {
		p += ".rego"
	}
	return p
}

func keyOf(files fstest.MapFS) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%q %d\n", n, len(files[n].Data))
		h.Write(files[n].Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
