package load

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A listing accepts every state its removal group was in between sending and
// reading, and no other.
func TestRemovalStates(t *testing.T) {
	const g = "CN=G,DC=x"
	r := newRemovals([]RemovalGroup{{Group: g, Members: []string{"CN=A,DC=x", "CN=B,DC=x"}}})
	s := r.groups[0]
	a, b := dnKey("CN=A,DC=x"), dnKey("CN=B,DC=x")
	r.set(s, "", a) // 1: DELETE A in flight
	r.set(s, a)     // 2: DELETE A answered
	r.set(s, a, "") // 3: A re-added through LDAP
	r.set(s, a, "", b)
	r.set(s, b) // 5: DELETE B answered
	tests := []struct {
		name     string
		group    string
		from, to uint64
		want     []string
	}{
		// Before any removal only the full group is right.
		{"start", g, 0, 0, []string{""}},
		// After DELETE A was answered, only the group without A.
		{"after delete", g, 2, 2, []string{a}},
		// A listing in flight across the answer may show either.
		{"across delete", g, 1, 2, []string{"", a}},
		// After the re-add, the cache may still serve the removal.
		{"after re-add", g, 3, 3, []string{a, ""}},
		// The next DELETE answered ends that: stale A absence is wrong again.
		{"after second delete", g, 5, 5, []string{b}},
		{"whole run", g, 0, 5, []string{"", a, b}},
		// The group named in another spelling is the same group.
		{"other spelling", "cn=g, dc=X", 2, 2, []string{a}},
		// Other groups are not removal groups: nil means "check as usual".
		{"other group", "CN=H,DC=x", 0, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.statesOf(tt.group, tt.from, tt.to)
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("statesOf(%d, %d) = %q, want %q", tt.from, tt.to, got, want)
			}
		})
	}
}

// Removal cycles take members in turn and never two cycles on one group at once.
func TestRemovalAcquire(t *testing.T) {
	r := newRemovals([]RemovalGroup{{Group: "CN=G,DC=x", Members: []string{"CN=A,DC=x", "CN=B,DC=x"}}})
	s, m, ok := r.acquire()
	if !ok || m != "CN=A,DC=x" {
		t.Fatalf("first acquire = %q, %t", m, ok)
	}
	if _, _, ok := r.acquire(); ok {
		t.Fatal("a busy group was acquired twice")
	}
	r.release(s)
	if _, m, _ := r.acquire(); m != "CN=B,DC=x" {
		t.Errorf("second member = %q, want CN=B,DC=x", m)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		// Nearest rank: p99 of 1..100 is 99, not an interpolation.
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		// With few samples the tail is the maximum: p99 of 10 samples is the 10th.
		{"p99 of 10", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"single sample", ms(7), 50, 7 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := time.Duration(percentile(tt.sorted, tt.p)); got != tt.want {
				t.Errorf("percentile = %v, want %v", got, tt.want)
			}
		})
	}
}

// Only a directory answer with exactly the unfiltered listing's DNs is right.
func TestCheckDNs(t *testing.T) {
	c := NewChecker()
	q := Query{Group: "CN=G,DC=x"}
	c.SetDNs(q, []string{"CN=A,DC=x", "CN=B,DC=x"})
	tests := []struct {
		name  string
		q     Query
		dns   []string
		right bool
	}{
		{"same, other order and case", q, []string{"cn=b,dc=x", "CN=A,DC=x"}, true},
		// The size limit is the gateway's: a directory search is checked whole.
		{"size limit ignored", Query{Group: q.Group, SizeLimit: 1}, []string{"CN=A,DC=x", "CN=B,DC=x"}, true},
		{"missing", q, []string{"CN=A,DC=x"}, false},
		{"extra", q, []string{"CN=A,DC=x", "CN=B,DC=x", "CN=C,DC=x"}, false},
		{"twice", q, []string{"CN=A,DC=x", "CN=A,DC=x"}, false},
		{"unknown query", Query{Group: "CN=H,DC=x"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.CheckDNs(tt.q, tt.dns); (got == "") != tt.right {
				t.Errorf("CheckDNs = %q, want right=%t", got, tt.right)
			}
		})
	}
}

// TestPaired: each repetition's ratio is of that repetition's two runs; a repetition
// missing either run, or without a CPU reading, gives no pair.
func TestPaired(t *testing.T) {
	run := func(rep int, target, workload string, us ...float64) *Report {
		r := &Report{Target: target, Workload: workload, Repetition: rep}
		for _, u := range us {
			r.CPU = append(r.CPU, ProcessCPU{Name: target, PerRequest: u})
		}
		r.CPU = append(r.CPU, ProcessCPU{Name: ClientProcess, PerRequest: 1000}) // never counted
		return r
	}
	reports := []*Report{
		run(1, "bare", "w", 100), run(1, "dirgate", "w", 100, 50), // dirgate and its Redis: 1.5
		run(0, "dirgate", "w", 120), run(0, "bare", "w", 60), // 2.0, listed first once sorted
		run(0, "dirgate", "other", 999), run(2, "dirgate", "w", 80), // no bare run in repetition 2
		run(3, "bare", "w", 90), run(3, "dirgate", "w"), // no reading
	}
	got := Paired(reports, "w", "dirgate", "bare")
	if fmt.Sprint(got) != "[2 1.5]" {
		t.Fatalf("Paired = %v, want [2 1.5]", got)
	}
	if s := SpreadOf(got); s != (Spread{N: 2, Median: 1.75, Min: 1.5, Max: 2}) {
		t.Fatalf("SpreadOf = %+v", s)
	}
	if s := SpreadOf(nil).String(); s != "-" {
		t.Fatalf("empty spread prints %q", s)
	}
}
