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
	// KBPerRequest is the median of the runs' mean answer size, as sent (compressed
	// when the answers were).
	KBPerRequest float64 `json:"kbPerRequest"`
	// ServerCPU is the median of the runs' server CPU per request in microseconds
	// (Report.ServerCPU), 0 when no process was read; CPU is each process's median.
	ServerCPU float64            `json:"serverCpuUsPerRequest,omitempty"`
	CPU       map[string]float64 `json:"cpuUsPerRequest,omitempty"`
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
		var tp, kb, server []float64
		var p50, p95, p99 []time.Duration
		procs := map[string][]float64{}
		for _, r := range rs {
			tp = append(tp, r.All.Throughput)
			kb = append(kb, r.All.KBPerRequest)
			if c, ok := r.ServerCPU(); ok {
				server = append(server, c)
			}
			for _, c := range r.CPU {
				procs[c.Name] = append(procs[c.Name], c.PerRequest)
			}
			p50, p95, p99 = append(p50, time.Duration(r.All.P50)), append(p95, time.Duration(r.All.P95)), append(p99, time.Duration(r.All.P99))
			s.Requests += r.All.Requests
			s.Errors += r.All.ErrorCount()
			s.Wrong += r.All.Wrong
		}
		s.Throughput, s.KBPerRequest, s.ServerCPU = median(tp), median(kb), median(server)
		for name, v := range procs {
			if s.CPU == nil {
				s.CPU = map[string]float64{}
			}
			s.CPU[name] = median(v)
		}
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

// WriteSummary prints the medians, and for each workload dirgate's figures against
// the bare server's (throughput as a share, server CPU per request and p99 as
// factors) and its throughput as a multiple of the direct LDAP path's.
func WriteSummary(w io.Writer, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\ttarget\truns\treq/s\tp50 ms\tp95 ms\tp99 ms\tKB/req\tcpu µs/req\trequests\terrors\twrong\tvs bare\tcpu × bare\tp99 × bare\tvs ldap\t")
	for _, s := range sums {
		vsBare, cpuBare, p99Bare, vsLDAP := "", "", "", ""
		if s.Target == "dirgate" {
			if b, ok := Find(sums, s.Workload, "bare"); ok && b.Throughput > 0 {
				vsBare = fmt.Sprintf("%.0f%%", 100*s.Throughput/b.Throughput)
				if b.ServerCPU > 0 && s.ServerCPU > 0 {
					cpuBare = fmt.Sprintf("%.2f", s.ServerCPU/b.ServerCPU)
				}
				if b.P99 > 0 {
					p99Bare = fmt.Sprintf("%.2f", float64(s.P99)/float64(b.P99))
				}
			}
			if l, ok := Find(sums, s.Workload, "ldap"); ok && l.Throughput > 0 {
				vsLDAP = fmt.Sprintf("%.0fx", s.Throughput/l.Throughput)
			}
		}
		cpu := "-"
		if s.ServerCPU > 0 {
			cpu = fmt.Sprintf("%.0f", s.ServerCPU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%.0f\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", s.Workload, s.Target, s.Runs,
			s.Throughput, s.P50, s.P95, s.P99, s.KBPerRequest, cpu, s.Requests, s.Errors, s.Wrong, vsBare, cpuBare, p99Bare, vsLDAP)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// Paired is the ratio of target's server CPU per request to base's in each repetition
// where both ran workload and both were read, in repetition order. Two runs of one
// repetition are seconds apart, so a ratio of the pair is less exposed to the machine's
// drift between repetitions than the ratio of two medians (on the project's shared
// 2-core machines the bare server's own figure moved by 70% between invocations).
func Paired(reports []*Report, workload, target, base string) []float64 {
	type pair struct{ t, b float64 }
	byRep := map[int]*pair{}
	var reps []int
	for _, r := range reports {
		if r.Workload != workload || (r.Target != target && r.Target != base) {
			continue
		}
		c, ok := r.ServerCPU()
		if !ok || c <= 0 {
			continue
		}
		p := byRep[r.Repetition]
		if p == nil {
			p = &pair{}
			byRep[r.Repetition] = p
			reps = append(reps, r.Repetition)
		}
		if r.Target == target {
			p.t = c
		} else {
			p.b = c
		}
	}
	slices.Sort(reps)
	var out []float64
	for _, rep := range reps {
		if p := byRep[rep]; p.t > 0 && p.b > 0 {
			out = append(out, p.t/p.b)
		}
	}
	return out
}

// Spread is a set of ratios' median and range.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// SpreadOf summarises v (the zero Spread when v is empty).
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	return Spread{N: len(v), Median: median(v), Min: slices.Min(v), Max: slices.Max(v)}
}

func (s Spread) String() string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f, %d pairs)", s.Median, s.Min, s.Max, s.N)
}
