package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/upstream/ldap"
)

// What BenchmarkChangeFeedBulk measures, and how: the report written as JSON, the
// feed reader's reads, the polling clients, the DC's CPU.

type bulkReport struct {
	Config  bulkConfig  `json:"config"`
	Started time.Time   `json:"started"`
	Planned int         `json:"changes"`
	Phases  []bulkPhase `json:"phases"`
}

type bulkPhase struct {
	Name        string         `json:"name"`
	Repeat      int            `json:"repeat"`
	WindowS     float64        `json:"windowS"`     // how long the CPU was read over, from the first change
	DCCPUS      float64        `json:"dcCpuS"`      // samba processes' utime+stime over the window
	DCProcesses int            `json:"dcProcesses"` // samba processes counted at the end
	ProcessCPUS float64        `json:"processCpuS"` // this process: both instances, the clients, the writers
	LoadAvg     [2]string      `json:"loadAvg"`     // at the start and at the end
	Writes      *bulkWriteSum  `json:"writes,omitempty"`
	Feed        *bulkFeedSum   `json:"feed,omitempty"`
	Polls       map[string]int `json:"polls,omitempty"` // instance:cache status (or error) -> answers
	PolledBytes int64          `json:"polledBytes,omitempty"`
	Latency     *bulkLatency   `json:"latency,omitempty"`
	FeedPart    *bulkLatency   `json:"feedPart,omitempty"`   // committed to the feed's read
	RefillPart  *bulkLatency   `json:"refillPart,omitempty"` // the feed's read to both answers
	Samples     []*bulkSample  `json:"samples,omitempty"`
}

// bulkSample is one change: times in seconds from the phase's start.
type bulkSample struct {
	Index     int       `json:"i"`
	Group     int       `json:"group"`
	User      int       `json:"user"`
	Add       bool      `json:"add"`
	Issued    float64   `json:"issuedS"`
	Committed float64   `json:"committedS"`
	Seen      []float64 `json:"seenS"`    // per instance, -1 when never
	Latency   float64   `json:"latencyS"` // the later instance's seen minus committed, -1 when never
	// Read is when the feed's read that reported the group after the change
	// returned (the first that started after the write returned), -1 when none:
	// Read-Committed is the feed's part of the latency, Latency-that the refill's.
	Read float64 `json:"readS"`
}

type bulkLatency struct {
	N      int     `json:"n"`
	Unseen int     `json:"unseen"`
	P50S   float64 `json:"p50S"`
	P95S   float64 `json:"p95S"`
	P99S   float64 `json:"p99S"`
	MaxS   float64 `json:"maxS"`
}

// latencyOf takes the nearest-rank percentiles of the samples' latencies; a change
// never seen ranks above every seen one (+Inf).
func latencyOf(samples []*bulkSample) *bulkLatency {
	return percentiles(samples, func(s *bulkSample) float64 { return s.Latency })
}

// partsOf splits the latency at the feed's read.
func partsOf(samples []*bulkSample) (feed, refill *bulkLatency) {
	return percentiles(samples, func(s *bulkSample) float64 {
			if s.Read < 0 {
				return -1
			}
			return s.Read - s.Committed
		}), percentiles(samples, func(s *bulkSample) float64 {
			if s.Read < 0 || s.Latency < 0 {
				return -1
			}
			return max(0, s.Latency-(s.Read-s.Committed))
		})
}

func percentiles(samples []*bulkSample, v func(*bulkSample) float64) *bulkLatency {
	var d []float64
	l := &bulkLatency{N: len(samples)}
	for _, s := range samples {
		if v(s) < 0 {
			l.Unseen++
			d = append(d, math.Inf(1))
			continue
		}
		d = append(d, v(s))
	}
	if len(d) == 0 {
		return l
	}
	slices.Sort(d)
	// JSON has no infinity: a percentile that falls on an unseen change is -1.
	pct := func(p float64) float64 {
		v := d[max(0, int(math.Ceil(p*float64(len(d))))-1)]
		if math.IsInf(v, 1) {
			return -1
		}
		return v
	}
	l.P50S, l.P95S, l.P99S, l.MaxS = pct(0.5), pct(0.95), pct(0.99), pct(1)
	return l
}

// bulkWrites records the writers' timing.
type bulkWrites struct {
	mu          sync.Mutex
	n           int
	first, last time.Duration
	took        []float64
}

type bulkWriteSum struct {
	Changes   int     `json:"changes"`
	WallS     float64 `json:"wallS"` // first issued to last committed
	RatePerS  float64 `json:"ratePerS"`
	WriteP50S float64 `json:"writeP50S"` // one modify's round trip
	WriteP99S float64 `json:"writeP99S"`
	WriteMaxS float64 `json:"writeMaxS"`
}

func newBulkWrites(n int) *bulkWrites { return &bulkWrites{first: -1, took: make([]float64, 0, n)} }

func (w *bulkWrites) record(_ int, start, issued, done time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.first < 0 || issued.Sub(start) < w.first {
		w.first = issued.Sub(start)
	}
	w.last = max(w.last, done.Sub(start))
	w.took = append(w.took, done.Sub(issued).Seconds())
}

// lastDone is when the last write returned, from the start.
func (w *bulkWrites) lastDone() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *bulkWrites) summary() *bulkWriteSum {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &bulkWriteSum{Changes: w.n, WallS: (w.last - w.first).Seconds()}
	if s.WallS > 0 {
		s.RatePerS = float64(w.n) / s.WallS
	}
	if len(w.took) > 0 {
		t := slices.Sorted(slices.Values(w.took))
		s.WriteP50S, s.WriteP99S, s.WriteMaxS = t[len(t)/2], t[min(len(t)-1, int(math.Ceil(0.99*float64(len(t))))-1)], t[len(t)-1]
	}
	return s
}

// readCounter records the change feed's reads, whichever instance leads.
type readCounter struct {
	mu     sync.Mutex
	reads  []bulkRead
	failed []time.Time // reads that failed (the feed retries with a backoff)
}

type bulkRead struct {
	at      time.Time
	took    time.Duration
	groups  map[string]bool // the changed objects' GUIDs
	changes int
	moved   bool // the USN moved: the read searched for changes
	resync  string
}

type bulkFeedSum struct {
	Reads       int     `json:"reads"`
	ReadsMoved  int     `json:"readsSearching"` // reads whose USN moved: one paged search each
	Changes     int     `json:"changedObjects"`
	MaxPerRead  int     `json:"maxChangedPerRead"`
	Pages       int     `json:"pages"`    // of the paged searches, at the adapter's page size
	Searches    int     `json:"searches"` // two base reads per read, plus the pages
	Resyncs     int     `json:"resyncs"`
	ReadP50S    float64 `json:"readP50S"`
	ReadMaxS    float64 `json:"readMaxS"`
	LongestGapS float64 `json:"longestGapS"` // between two reads' starts
	Failed      int     `json:"failedReads"`
}

// readOf sets each sample's Read: the end of the first read that started after
// its write was sent and reported its group (groups: the groups' GUIDs). A read that
// starts before the write returns may already see it (its USN bound is read first);
// one that started before the write was sent cannot.
func (c *readCounter) readOf(samples []*bulkSample, start time.Time, groups []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range samples {
		s.Read = -1
		for _, r := range c.reads {
			if at := r.at.Sub(start).Seconds(); at >= s.Issued && r.groups[groups[s.Group]] {
				s.Read = at + r.took.Seconds()
				break
			}
		}
	}
}

func (c *readCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reads)
}

func (c *readCounter) summary(from, to time.Time) *bulkFeedSum {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &bulkFeedSum{}
	var took []float64
	var prev time.Time
	for _, r := range c.reads {
		if r.at.Before(from) || r.at.After(to) {
			continue
		}
		s.Reads++
		took = append(took, r.took.Seconds())
		s.Changes += r.changes
		s.MaxPerRead = max(s.MaxPerRead, r.changes)
		s.Searches += 2
		if r.moved {
			s.ReadsMoved++
			pages := max(1, (r.changes+ldap.DefaultPageSize-1)/ldap.DefaultPageSize)
			s.Pages += pages
			s.Searches += pages
		}
		if r.resync != "" {
			s.Resyncs++
		}
		if !prev.IsZero() {
			s.LongestGapS = max(s.LongestGapS, r.at.Sub(prev).Seconds())
		}
		prev = r.at
	}
	for _, at := range c.failed {
		if !at.Before(from) && !at.After(to) {
			s.Failed++
		}
	}
	if len(took) > 0 {
		slices.Sort(took)
		s.ReadP50S, s.ReadMaxS = took[len(took)/2], took[len(took)-1]
	}
	return s
}

// countingSource is the feed's source with its reads recorded.
type countingSource struct {
	dirgate.ChangeSource
	c *readCounter
}

func (s *countingSource) ReadChanges(ctx context.Context, pos dirgate.ChangePosition, max int) (dirgate.ChangeBatch, error) {
	start := time.Now()
	b, err := s.ChangeSource.ReadChanges(ctx, pos, max)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if err != nil {
		s.c.failed = append(s.c.failed, start)
		return b, err
	}
	changed := make(map[string]bool, len(b.Changes))
	for _, ch := range b.Changes {
		changed[ch.GUID] = true
	}
	s.c.reads = append(s.c.reads, bulkRead{at: start, took: time.Since(start), changes: len(b.Changes),
		moved: b.Position.USN != pos.USN, resync: b.Resync, groups: changed})
	return b, nil
}

// ChangeCoverage passes the source's on, so that the feed still checks it.
func (s *countingSource) ChangeCoverage(ctx context.Context) error {
	if cc, ok := s.ChangeSource.(dirgate.ChangeCoverage); ok {
		return cc.ChangeCoverage(ctx)
	}
	return nil
}

// bulkPoller is the clients: on each instance, each group with a change not yet
// seen there is listed every Poll, and its pending changes checked against the
// answer (the member's GUID present or absent). Groups with nothing pending are not
// asked, so that polling costs what clients interested in the changed groups
// would.
type bulkPoller struct {
	bf      *bulkFixture
	bases   []string
	t0      time.Time
	mu      sync.Mutex
	pending [][][]*bulkSample // instance, group
	samples []*bulkSample
	counts  map[string]int
	bytes   atomic.Int64
	// logf reports the first few failed polls.
	logf     func(string, ...any)
	errorLog int
	wg       sync.WaitGroup
}

func newBulkPoller(bf *bulkFixture, bases []string, n int) *bulkPoller {
	p := &bulkPoller{bf: bf, bases: bases, counts: map[string]int{}, samples: make([]*bulkSample, 0, n)}
	for range bases {
		p.pending = append(p.pending, make([][]*bulkSample, len(bf.groups)))
	}
	return p
}

func (p *bulkPoller) start(ctx context.Context, start time.Time) {
	p.t0 = start
	for inst := range p.bases {
		for g := range p.bf.groups {
			p.wg.Add(1)
			go p.loop(ctx, inst, g)
		}
	}
}

// committed adds change i, whose write returned, to every instance's pending.
func (p *bulkPoller) committed(i int, ch bulkChange, issued, done time.Duration) {
	s := &bulkSample{Index: i, Group: ch.Group, User: ch.User, Add: ch.Add, Issued: issued.Seconds(), Committed: done.Seconds(), Latency: -1}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s)
	for inst := range p.bases {
		s.Seen = append(s.Seen, -1)
		// An earlier change of the same pair not seen yet never will be: this one
		// undoes it.
		p.pending[inst][ch.Group] = slices.DeleteFunc(p.pending[inst][ch.Group], func(o *bulkSample) bool { return o.User == ch.User })
		p.pending[inst][ch.Group] = append(p.pending[inst][ch.Group], s)
	}
}

func (p *bulkPoller) loop(ctx context.Context, inst, g int) {
	defer p.wg.Done()
	t := time.NewTicker(p.bf.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		idle := len(p.pending[inst][g]) == 0
		p.mu.Unlock()
		if idle {
			continue
		}
		body, st, err := bulkGet(p.bases[inst], p.bf.groups[g])
		at := time.Since(p.t0).Seconds()
		key := strconv.Itoa(inst) + ":" + st
		if err != nil {
			key = strconv.Itoa(inst) + ":" + err.Error()
		}
		p.bytes.Add(int64(len(body)))
		p.mu.Lock()
		p.counts[key]++
		if err != nil && p.errorLog < 5 {
			p.errorLog++
			p.logf("poll %s on instance %d: %v: %.300s", p.bf.groups[g], inst, err, body)
		}
		if err == nil {
			p.pending[inst][g] = slices.DeleteFunc(p.pending[inst][g], func(s *bulkSample) bool {
				if bytes.Contains(body, []byte(`"guid":"`+p.bf.guids[s.User]+`"`)) != s.Add {
					return false
				}
				s.Seen[inst] = at
				if !slices.Contains(s.Seen, -1) {
					s.Latency = slices.Max(s.Seen) - s.Committed
				}
				return true
			})
		}
		p.mu.Unlock()
	}
}

// wait returns once nothing is pending, or after bound.
func (p *bulkPoller) wait(ctx context.Context, bound time.Duration) {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		p.mu.Lock()
		left := 0
		for _, inst := range p.pending {
			for _, g := range inst {
				left += len(g)
			}
		}
		p.mu.Unlock()
		if left == 0 {
			return
		}
	}
}

func (p *bulkPoller) stop() { p.wg.Wait() }

// bulkGet lists group's direct members as the administrator: the body and how the
// cache served it.
func bulkGet(base, group string) ([]byte, string, error) {
	req, _ := http.NewRequest("GET", base+"?group="+url.QueryEscape(group), nil)
	req.Header.Set("Adm-Authorization", "feed-admin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, "", err
	}
	if res.StatusCode != http.StatusOK {
		err = &httpStatusError{res.StatusCode}
	}
	return body, res.Header.Get("X-Dirgate-Cache"), err
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return "status " + strconv.Itoa(e.code) }

// dcCPU is the CPU time of the samba processes in this process's network namespace
// (the DC this process talks to), reaped children included, and their number.
func dcCPU() (time.Duration, int) {
	self, _ := os.Readlink("/proc/self/ns/net")
	dirs, _ := os.ReadDir("/proc")
	var ticks int64
	n := 0
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", d.Name())
		exe, _ := os.Readlink(filepath.Join(dir, "exe"))
		ns, _ := os.Readlink(filepath.Join(dir, "ns/net"))
		if filepath.Base(exe) != "samba" || ns != self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is the 3rd field,
		// utime, stime, cutime, cstime the 14th to 17th.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			t, _ := strconv.ParseInt(v, 10, 64)
			ticks += t
		}
		n++
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond, n
}

// processCPU is this process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
