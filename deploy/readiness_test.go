package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadinessCommentsMatchTheCode: /readyz answers 200 whenever the server
// answers, with each check's outcome in its body (cmd/dirgate's TestReadiness;
// docs/operations.md, "Readiness"). A manifest comment that promised a 503 on a
// failing check would have operators expect a pod to leave the Service on its own.
func TestReadinessCommentsMatchTheCode(t *testing.T) {
	var seen int
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// A comment is a run of consecutive lines starting with #.
		var block []string
		flush := func() {
			text := strings.Join(block, " ")
			if strings.Contains(text, "/readyz") {
				seen++
				if strings.Contains(text, "503") || strings.Contains(text, "unready") {
					t.Errorf("%s: the comment %q says /readyz fails; it answers 200 while the server answers", p, text)
				}
			}
			block = block[:0]
		}
		for _, line := range strings.Split(string(data), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
				block = append(block, strings.TrimSpace(c))
				continue
			}
			flush()
		}
		flush()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no comment mentions /readyz: the walk read nothing")
	}
}
