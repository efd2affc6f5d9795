package load

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// maxExamples bounds the wrong answers and errors described in a report; all are
// counted.
const maxExamples = 5

// Outcome is what one timed request produced.
type Outcome struct {
	// Status is the HTTP status, or StatusLDAPOK for a directory answer; 0 when no
	// answer came (Err says why).
	Status int
	// Want is the status the request had to get; another one is an error.
	Want int
	Err  error
	// Wrong, when not empty, says how an answer with the wanted status was wrong.
	Wrong string
	// Cache is dirgate's X-Dirgate-Cache header, when it sent one.
	Cache string
	// Bytes is the size of the answer's body (for the directory: of its entries' DNs
	// and values).
	Bytes int
}

// StatusLDAPOK is the status recorded for a successful directory search (LDAP
// result code 0), so that every target reports through one table.
const StatusLDAPOK = 200

// Recorder collects one client's samples; it is used by one goroutine. A nil
// Recorder records nothing (the warm-up).
type Recorder struct {
	classes map[string]*classRec
}

type classRec struct {
	lat      []time.Duration
	bytes    int64
	errors   map[string]int
	cache    map[string]int
	wrong    int
	examples []string
}

// Add records one request of class (list, remove, ...) that took lat.
func (r *Recorder) Add(class string, lat time.Duration, o Outcome) {
	if r == nil {
		return
	}
	c := r.class(class)
	c.lat = append(c.lat, lat)
	c.bytes += int64(o.Bytes)
	if o.Cache != "" {
		c.cache[o.Cache]++
	}
	switch {
	case o.Status == 0:
		c.errors["transport"]++
		c.example(fmt.Sprintf("%s: no answer: %v", class, o.Err))
	case o.Status != o.Want:
		c.errors[strconv.Itoa(o.Status)]++
		c.example(fmt.Sprintf("%s: status %d, want %d: %v", class, o.Status, o.Want, o.Err))
	case o.Wrong != "":
		c.wrong++
		c.example(fmt.Sprintf("%s: wrong answer: %s", class, o.Wrong))
	}
}

// AddError counts a failure of class that is not a timed request (a re-add through
// the directory): it is an error of the run, not a latency sample.
func (r *Recorder) AddError(class string, o Outcome) {
	if r == nil {
		return
	}
	c := r.class(class)
	c.errors["failed"]++
	c.example(fmt.Sprintf("%s: %v", class, o.Err))
}

func (r *Recorder) class(name string) *classRec {
	if r.classes == nil {
		r.classes = map[string]*classRec{}
	}
	c := r.classes[name]
	if c == nil {
		c = &classRec{errors: map[string]int{}, cache: map[string]int{}}
		r.classes[name] = c
	}
	return c
}

func (c *classRec) example(s string) {
	if len(c.examples) < maxExamples {
		c.examples = append(c.examples, s)
	}
}

// Report is the result of one run.
type Report struct {
	Target      string `json:"target"`
	Workload    string `json:"workload"`
	Concurrency int    `json:"concurrency"`
	// Repetition is the round of interleaved runs this run belongs to (the bench
	// command's -repeat), which pairs it with the other targets' runs of that round.
	Repetition int           `json:"repetition"`
	Elapsed    time.Duration `json:"elapsedNs"`
	// All is every request; Classes splits them by kind (list, remove).
	All     Stats             `json:"all"`
	Classes map[string]*Stats `json:"classes"`
	// CPU is each process's CPU time during the run (Options.Processes).
	CPU []ProcessCPU `json:"cpu,omitempty"`
}

// ServerCPU is the CPU per request, in microseconds, of the processes that serve
// (every one but the load generator, "client"), and whether any was read.
func (r *Report) ServerCPU() (float64, bool) {
	sum, ok := 0.0, false
	for _, c := range r.CPU {
		if c.Name != ClientProcess {
			sum, ok = sum+c.PerRequest, true
		}
	}
	return sum, ok
}

// ClientProcess names the load generator's own CPU in a report.
const ClientProcess = "client"

// Stats summarise a set of requests. Latencies are in milliseconds in JSON.
type Stats struct {
	Requests   int            `json:"requests"`
	Throughput float64        `json:"throughputPerSec"`
	P50        Millis         `json:"p50Ms"`
	P95        Millis         `json:"p95Ms"`
	P99        Millis         `json:"p99Ms"`
	Max        Millis         `json:"maxMs"`
	Errors     map[string]int `json:"errors"` // by status; "transport" when none came
	Wrong      int            `json:"wrong"`
	// KBPerRequest is the mean size of an answer.
	KBPerRequest float64        `json:"kbPerRequest"`
	Cache        map[string]int `json:"cache,omitempty"`
	Examples     []string       `json:"examples,omitempty"`
}

// ErrorCount is the number of requests that got another status than wanted.
func (s *Stats) ErrorCount() int {
	n := 0
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// Millis is a duration that reads as milliseconds in JSON.
type Millis time.Duration

// MarshalJSON writes the duration in milliseconds with microsecond precision.
func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(time.Duration(m).Microseconds())/1000, 'f', 3, 64), nil
}

// String prints milliseconds.
func (m Millis) String() string {
	return strconv.FormatFloat(float64(time.Duration(m).Microseconds())/1000, 'f', 2, 64)
}

func newReport(target, workload string, conc int, elapsed time.Duration, recs []*Recorder) *Report {
	rep := &Report{Target: target, Workload: workload, Concurrency: conc, Elapsed: elapsed, Classes: map[string]*Stats{}}
	merged := map[string]*classRec{}
	all := &classRec{errors: map[string]int{}, cache: map[string]int{}}
	for _, r := range recs {
		for _, name := range slices.Sorted(maps.Keys(r.classes)) {
			c := r.classes[name]
			m := merged[name]
			if m == nil {
				m = &classRec{errors: map[string]int{}, cache: map[string]int{}}
				merged[name] = m
			}
			for _, dst := range []*classRec{m, all} {
				dst.lat = append(dst.lat, c.lat...)
				dst.bytes += c.bytes
				dst.wrong += c.wrong
				for k, v := range c.errors {
					dst.errors[k] += v
				}
				for k, v := range c.cache {
					dst.cache[k] += v
				}
				for _, e := range c.examples {
					dst.example(e)
				}
			}
		}
	}
	for name, m := range merged {
		rep.Classes[name] = m.stats(elapsed)
	}
	rep.All = *all.stats(elapsed)
	return rep
}

func (c *classRec) stats(elapsed time.Duration) *Stats {
	slices.Sort(c.lat)
	s := &Stats{Requests: len(c.lat), Errors: c.errors, Wrong: c.wrong, Examples: c.examples}
	if len(c.cache) > 0 {
		s.Cache = c.cache
	}
	if elapsed > 0 {
		s.Throughput = float64(len(c.lat)) / elapsed.Seconds()
	}
	if len(c.lat) > 0 {
		s.P50, s.P95, s.P99 = percentile(c.lat, 50), percentile(c.lat, 95), percentile(c.lat, 99)
		s.Max = Millis(c.lat[len(c.lat)-1])
		s.KBPerRequest = float64(c.bytes) / float64(len(c.lat)) / 1024
	}
	return s
}

// percentile is the nearest-rank percentile of sorted latencies: the smallest value
// that at least p% of the samples do not exceed.
func percentile(sorted []time.Duration, p int) Millis {
	rank := (len(sorted)*p + 99) / 100
	return Millis(sorted[max(rank, 1)-1])
}

// WriteTable prints one line per report and class: throughput, latency percentiles,
// errors by status, wrong answers and how dirgate's cache served the listings.
func WriteTable(w io.Writer, reports []*Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tworkload\tclass\tclients\trequests\treq/s\tKB/req\tp50 ms\tp95 ms\tp99 ms\tmax ms\terrors\twrong\tcache\tcpu µs/req\t")
	for _, r := range reports {
		names := slices.Sorted(maps.Keys(r.Classes))
		rows := []string{"all"}
		if len(names) > 1 {
			rows = append(rows, names...)
		}
		for _, name := range rows {
			s := &r.All
			if name != "all" {
				s = r.Classes[name]
			}
			cpu := "-"
			if name == "all" && len(r.CPU) > 0 {
				var parts []string
				for _, c := range r.CPU {
					parts = append(parts, fmt.Sprintf("%s:%.0f", c.Name, c.PerRequest))
				}
				cpu = strings.Join(parts, " ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Target, r.Workload, name,
				r.Concurrency, s.Requests, s.Throughput, s.KBPerRequest, s.P50, s.P95, s.P99, s.Max, counts(s.Errors), s.Wrong, counts(s.Cache), cpu)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, r := range reports {
		for _, e := range r.All.Examples {
			fmt.Fprintf(w, "  %s %s: %s\n", r.Target, r.Workload, e)
		}
	}
	return nil
}

// counts prints a count map as "502:3 transport:1", "-" when empty.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
