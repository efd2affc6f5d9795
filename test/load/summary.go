package load

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Summary is the median of repeated runs of one workload against one target. On a
// shared 2-core machine single runs vary by tens of percent; runs of different
// targets are interleaved and the median of each is compared.
type Summary struct {
	Workload   string  `json:"workload"`
	Target     string  `json:"target"`
	Runs       int     `json:"runs"`
	Throughput float64 `json:"throughputPerSec"`
	P50        Millis  `json:"p50Ms"`
	P95        Millis  `json:"p95Ms"`
	P99        Millis  `json:"p99Ms"`
	Requests   int     `json:"requests"` // over all runs
	Errors     int     `json:"errors"`   // over all runs
	Wrong      int     `json:"wrong"`    // over all runs
}

// Summarize groups reports by workload and target, in order of first appearance, and
// takes the median of each figure separately (over the "all" class).
func Summarize(reports []*Report) []Summary {
	type key struct{ w, t string }
	var order []key
	groups := map[key][]*Report{}
	for _, r := range reports {
		k := key{r.Workload, r.Target}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Summary
	for _, k := range order {
		rs := groups[k]
		s := Summary{Workload: k.w, Target: k.t, Runs: len(rs)}
		var tp []float64
		var p50, p95, p99 []time.Duration
		for _, r := range rs {
			tp = append(tp, r.All.Throughput)
			p50, p95, p99 = append(p50, time.Duration(r.All.P50)), append(p95, time.Duration(r.All.P95)), append(p99, time.Duration(r.All.P99))
			s.Requests += r.All.Requests
			s.Errors += r.All.ErrorCount()
			s.Wrong += r.All.Wrong
		}
		s.Throughput = median(tp)
		s.P50, s.P95, s.P99 = Millis(median(p50)), Millis(median(p95)), Millis(median(p99))
		out = append(out, s)
	}
	return out
}

// median of an odd count is the middle value; of an even count, the mean of the two
// middle values.
func median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Find returns the summary of workload against target.
func Find(sums []Summary, workload, target string) (Summary, bool) {
	for _, s := range sums {
		if s.Workload == workload && s.Target == target {
			return s, true
		}
	}
	return Summary{}, false
}

// WriteSummary prints the medians, and for each workload dirgate's throughput as a
// share of the bare server's and as a multiple of the direct LDAP path's.
func WriteSummary(w io.Writer, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\ttarget\truns\treq/s\tp50 ms\tp95 ms\tp99 ms\trequests\terrors\twrong\tvs bare\tvs ldap\t")
	for _, s := range sums {
		vsBare, vsLDAP := "", ""
		if s.Target == "dirgate" {
			if b, ok := Find(sums, s.Workload, "bare"); ok && b.Throughput > 0 {
				vsBare = fmt.Sprintf("%.0f%%", 100*s.Throughput/b.Throughput)
			}
			if l, ok := Find(sums, s.Workload, "ldap"); ok && l.Throughput > 0 {
				vsLDAP = fmt.Sprintf("%.0fx", s.Throughput/l.Throughput)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", s.Workload, s.Target, s.Runs,
			s.Throughput, s.P50, s.P95, s.P99, s.Requests, s.Errors, s.Wrong, vsBare, vsLDAP)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
