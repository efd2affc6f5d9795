package ldap

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

func TestMoved(t *testing.T) {
	t0 := time.Unix(1000, 0).UTC()
	a := dirgate.ChangePosition{Source: "A|1", USN: 10, Time: t0}
	b := dirgate.ChangePosition{Source: "B|1", USN: 70, Time: t0.Add(time.Minute)}

	// Moving to another source keeps the old position as a mark.
	ab := moved(a, b, nil)
	if ab.Source != "B|1" || ab.USN != 70 || len(ab.Marks) != 1 {
		t.Fatalf("A to B: %+v", ab)
	}
	if m, ok := markOf(ab, "A|1"); !ok || m.USN != 10 || !m.Time.Equal(t0) {
		t.Fatalf("A's mark: %+v %v", m, ok)
	}
	if _, ok := markOf(ab, "B|1"); ok {
		t.Fatal("a position is a mark of its own source")
	}

	// Returning to A drops A's mark and keeps B's.
	a2 := dirgate.ChangePosition{Source: "A|1", USN: 15, Time: t0.Add(2 * time.Minute)}
	aba := moved(ab, a2, nil)
	if fmt.Sprint(markSources(aba)) != "[B|1]" || aba.Marks[0].USN != 70 {
		t.Fatalf("back to A: %+v", aba)
	}

	// Continuing on the same source carries the marks unchanged.
	a3 := dirgate.ChangePosition{Source: "A|1", USN: 20, Time: t0.Add(3 * time.Minute)}
	if got := moved(aba, a3, nil); got.USN != 20 || fmt.Sprint(markSources(got)) != "[B|1]" {
		t.Fatalf("same source: %+v", got)
	}

	// drop leaves out marks the caller no longer trusts, and an empty position
	// leaves no mark.
	got := moved(ab, dirgate.ChangePosition{Source: "A|2", USN: 1, Time: t0}, func(m dirgate.ChangeMark) bool {
		return strings.HasPrefix(m.Source, "A|")
	})
	if fmt.Sprint(markSources(got)) != "[B|1]" {
		t.Fatalf("dropped: %+v", got.Marks)
	}
	if got := moved(dirgate.ChangePosition{}, a, nil); got.Marks != nil {
		t.Fatalf("from no position: %+v", got.Marks)
	}
}

func TestMarksBounded(t *testing.T) {
	var p dirgate.ChangePosition
	for i := range 40 {
		p = moved(p, dirgate.ChangePosition{Source: fmt.Sprintf("S%d", i), USN: uint64(i), Time: time.Unix(int64(i), 0)}, nil)
		if len(p.Marks) > dirgate.MaxChangeMarks {
			t.Fatalf("%d marks", len(p.Marks))
		}
	}
	// The oldest are dropped: S39 is the position, S23..S38 the marks.
	if len(p.Marks) != dirgate.MaxChangeMarks || p.Marks[0].Source != "S23" || p.Marks[15].Source != "S38" {
		t.Fatalf("marks: %v", markSources(p))
	}
	// A stored position may hold duplicates (untrusted): they are not multiplied.
	p.Marks = append(p.Marks, p.Marks...)
	q := moved(p, dirgate.ChangePosition{Source: "S23", USN: 99, Time: time.Unix(99, 0)}, nil)
	if len(q.Marks) != dirgate.MaxChangeMarks {
		t.Fatalf("%d marks", len(q.Marks))
	}
	seen := map[string]bool{}
	for _, m := range q.Marks {
		if seen[m.Source] {
			t.Fatalf("%s named twice: %v", m.Source, markSources(q))
		}
		seen[m.Source] = true
	}
	if _, ok := markOf(q, "S23"); ok {
		t.Fatal("kept a mark of the new source")
	}
}
