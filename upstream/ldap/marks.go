package ldap

import (
	"slices"

	"github.com/dirgate/dirgate"
)

// A change position names one DC (USNs are per DC) and keeps marks of where the
// feed stood on the others it read (dirgate.ChangePosition.Marks), so that the feed
// continues on a DC it returns to instead of resyncing (docs/cache.md, "One
// watermark per DC"). This upstream is the only one that follows several sources.

// markOf returns the mark p keeps for source.
func markOf(p dirgate.ChangePosition, source string) (dirgate.ChangeMark, bool) {
	for _, m := range p.Marks {
		if m.Source == source {
			return m, true
		}
	}
	return dirgate.ChangeMark{}, false
}

// moved returns to, the position read next, carrying p's marks and, when to is on
// another source, p itself as the most recent mark, so that returning to p's source
// later continues from p. Marks of to's source, and those drop reports (nil: none),
// are left out: to replaces them. The newest dirgate.MaxChangeMarks are kept.
func moved(p, to dirgate.ChangePosition, drop func(dirgate.ChangeMark) bool) dirgate.ChangePosition {
	all := append(append([]dirgate.ChangeMark(nil), p.Marks...), dirgate.ChangeMark{Source: p.Source, USN: p.USN, Time: p.Time})
	// From the most recent back, so that a source named twice (a stored position is
	// untrusted input) keeps its latest mark.
	var marks []dirgate.ChangeMark
	seen := map[string]bool{to.Source: true, "": true}
	for i := len(all) - 1; i >= 0 && len(marks) < dirgate.MaxChangeMarks; i-- {
		m := all[i]
		if seen[m.Source] || drop != nil && drop(m) {
			continue
		}
		seen[m.Source] = true
		marks = append(marks, m)
	}
	slices.Reverse(marks)
	to.Marks = marks
	return to
}
