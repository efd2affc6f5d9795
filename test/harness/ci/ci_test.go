package ci

import (
	"fmt"
	"strings"
	"testing"
)

// recordingTB records Skipf and Fatalf instead of ending the goroutine. Its embedded
// nil testing.TB makes any other method panic, which fails the test loudly.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func TestSkipOrFail(t *testing.T) {
	for _, tt := range []struct {
		ci   string
		fail bool
	}{
		{"", false}, {"false", false}, {"0", false}, {"no", false},
		{"true", true}, {"1", true}, {"TRUE", true},
	} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			rec := &recordingTB{}
			SkipOrFailFrom(rec, func(k string) string {
				if k == "CI" {
					return tt.ci
				}
				return ""
			}, "redis-server is not installed")
			if rec.failed != tt.fail || rec.skipped == tt.fail {
				t.Fatalf("failed=%v skipped=%v, want failed=%v", rec.failed, rec.skipped, tt.fail)
			}
			if !strings.Contains(rec.msg, "redis-server is not installed") {
				t.Errorf("message %q lacks the reason", rec.msg)
			}
			if tt.fail && !strings.Contains(rec.msg, "CI must not skip") {
				t.Errorf("message %q does not say why CI fails", rec.msg)
			}
		})
	}
}
