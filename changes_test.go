package dirgate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
)

func TestChangePositionMoved(t *testing.T) {
	t0 := time.Unix(1000, 0).UTC()
	a := dirgate.ChangePosition{Source: "A|1", USN: 10, Time: t0}
	b := dirgate.ChangePosition{Source: "B|1", USN: 70, Time: t0.Add(time.Minute)}

	// Moving to another source keeps the old position as a mark.
	ab := a.Moved(b, nil)
	if ab.Source != "B|1" || ab.USN != 70 || len(ab.Marks) != 1 {
		t.Fatalf("A to B: %+v", ab)
	}
	if m, ok := ab.Mark("A|1"); !ok || m.USN != 10 || !m.Time.Equal(t0) {
		t.Fatalf("A's mark: %+v %v", m, ok)
	}
	if _, ok := ab.Mark("B|1"); ok {
		t.Fatal("a position is a mark of its own source")
	}

	// Returning to A drops A's mark and keeps B's.
	a2 := dirgate.ChangePosition{Source: "A|1", USN: 15, Time: t0.Add(2 * time.Minute)}
	aba := ab.Moved(a2, nil)
	if fmt.Sprint(sources(aba.Marks)) != "[B|1]" || aba.Marks[0].USN != 70 {
		t.Fatalf("back to A: %+v", aba)
	}

	// Continuing on the same source carries the marks unchanged.
	a3 := dirgate.ChangePosition{Source: "A|1", USN: 20, Time: t0.Add(3 * time.Minute)}
	if got := aba.Moved(a3, nil); got.USN != 20 || fmt.Sprint(sources(got.Marks)) != "[B|1]" {
		t.Fatalf("same source: %+v", got)
	}

	// drop leaves out marks the caller no longer trusts, and an empty position
	// leaves no mark.
	got := ab.Moved(dirgate.ChangePosition{Source: "A|2", USN: 1, Time: t0}, func(m dirgate.ChangeMark) bool {
		return strings.HasPrefix(m.Source, "A|")
	})
	if fmt.Sprint(sources(got.Marks)) != "[B|1]" {
		t.Fatalf("dropped: %+v", got.Marks)
	}
	if got := (dirgate.ChangePosition{}).Moved(a, nil); got.Marks != nil {
		t.Fatalf("from no position: %+v", got.Marks)
	}
}

func TestChangePositionMarksBounded(t *testing.T) {
	var p dirgate.ChangePosition
	for i := range 40 {
		p = p.Moved(dirgate.ChangePosition{Source: fmt.Sprintf("S%d", i), USN: uint64(i), Time: time.Unix(int64(i), 0)}, nil)
		if len(p.Marks) > dirgate.MaxChangeMarks {
			t.Fatalf("%d marks", len(p.Marks))
		}
	}
	// The oldest are dropped: S39 is the position, S23..S38 the marks.
	if len(p.Marks) != dirgate.MaxChangeMarks || p.Marks[0].Source != "S23" || p.Marks[15].Source != "S38" {
		t.Fatalf("marks: %v", sources(p.Marks))
	}
	// A stored position may hold duplicates (untrusted): they are not multiplied.
	p.Marks = append(p.Marks, p.Marks...)
	q := p.Moved(dirgate.ChangePosition{Source: "S23", USN: 99, Time: time.Unix(99, 0)}, nil)
	if len(q.Marks) != dirgate.MaxChangeMarks {
		t.Fatalf("%d marks", len(q.Marks))
	}
	seen := map[string]bool{}
	for _, m := range q.Marks {
		if seen[m.Source] {
			t.Fatalf("%s named twice: %v", m.Source, sources(q.Marks))
		}
		seen[m.Source] = true
	}
	if _, ok := q.Mark("S23"); ok {
		t.Fatal("kept a mark of the new source")
	}
}

func sources(ms []dirgate.ChangeMark) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Source)
	}
	return out
}
