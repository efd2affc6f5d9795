package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/redistest"
	goldap "github.com/go-ldap/ldap/v3"
)

// BenchmarkChangeFeedLatency measures, with default settings, the time from a change
// committed on the DC (the LDAP write has returned) to both of two instances sharing
// Redis answering the new listing, over changes of the kinds the feed follows. It
// reports the median and the 99th percentile of b.N changes (run it with at least 50) by
// hand against the DC (docs/benchmarks.md):
//
//	go test -run '^$' -bench ChangeFeedLatency -benchtime 60x ./cmd/dirgate/
func BenchmarkChangeFeedLatency(b *testing.B) {
	f := newFeedFixture(b)
	rs := redistest.Start(b)
	_, a := startFeedInstance(b, f, f.dc.BindDN, f.dc.Password, withRedis(b, rs.Addr())...)
	_, c := startFeedInstance(b, f, f.dc.BindDN, f.dc.Password, withRedis(b, rs.Addr())...)
	both := []string{a, c}
	g, c1 := f.dn("g"), f.dn("c1")
	const nested = "&includeIndirect=true"

	get := func(base, group, extra string) ([]dirgate.Object, string) {
		req, _ := http.NewRequest("GET", base+"?group="+url.QueryEscape(group)+extra, nil)
		req.Header.Set("Adm-Authorization", "feed-admin")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var objs []dirgate.Object
		if res.StatusCode == 200 {
			json.Unmarshal(body, &objs)
		}
		return objs, res.Header.Get("X-Dirgate-Cache")
	}
	// Each step makes one change and says how to recognise the new listing.
	type step struct {
		kind, group, extra string
		change             func()
		done               func([]dirgate.Object) bool
	}
	present := func(guid string, want bool, check func(dirgate.Object) bool) func([]dirgate.Object) bool {
		return func(objs []dirgate.Object) bool {
			o, found := findDN(objs, guid)
			return found == want && (!found || check == nil || check(o))
		}
	}
	member := func(group, dn string, add bool) func() {
		return func() {
			f.modify(b, group, func(m *goldap.ModifyRequest) {
				if add {
					m.Add("member", []string{dn})
				} else {
					m.Delete("member", []string{dn})
				}
			})
		}
	}
	u3 := f.dn("u3")
	name := 0
	var steps []step
	for i := 0; len(steps) < b.N; i++ {
		disabled := i%2 == 0
		uac := map[bool]string{true: "546", false: "544"}[disabled]
		oldName, newName := fmt.Sprintf("u1-%d", name), fmt.Sprintf("u1-%d", name+1)
		if name == 0 {
			oldName = "u1"
		}
		name++
		renameFrom, renameTo := "CN="+oldName+","+f.ou, "CN="+newName
		steps = append(steps,
			step{"member added", g, "", member(g, u3, true), present(f.guids["u3"], true, nil)},
			step{"member removed", g, "", member(g, u3, false), present(f.guids["u3"], false, nil)},
			step{"member added five levels down", c1, nested, member(f.dn("c5"), u3, true), present(f.guids["u3"], true, nil)},
			step{"member removed five levels down", c1, nested, member(f.dn("c5"), u3, false), present(f.guids["u3"], false, nil)},
			step{"account disabled or enabled", c1, nested, func() {
				f.modify(b, f.dn("u2"), func(m *goldap.ModifyRequest) { m.Replace("userAccountControl", []string{uac}) })
			}, present(f.guids["u2"], true, func(o dirgate.Object) bool {
				return o.AccountStatus != nil && o.AccountStatus.IsDisabled == disabled
			})},
			step{"renamed", g, "", func() {
				if err := f.adm.ModifyDN(goldap.NewModifyDNRequest(renameFrom, renameTo, true, "")); err != nil {
					b.Fatal(err)
				}
			}, present(f.guids["u1"], true, func(o dirgate.Object) bool { return strings.HasPrefix(o.DN, renameTo+",") })},
		)
	}
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	var all []time.Duration
	b.ResetTimer()
	for _, s := range steps[:b.N] {
		// Cached on both before the change.
		for _, base := range both {
			for i := 0; ; i++ {
				if _, st := get(base, s.group, s.extra); st == "hit" {
					break
				}
				if i == 50 {
					b.Fatalf("%s never cached", s.group)
				}
			}
		}
		// Changes arrive at any moment of the reader's interval, not just after a read.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		s.change()
		committed := time.Now()
		var wg sync.WaitGroup
		var worst time.Duration
		for _, base := range both {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					objs, _ := get(base, s.group, s.extra)
					if s.done(objs) {
						d := time.Since(committed)
						mu.Lock()
						worst = max(worst, d)
						mu.Unlock()
						return
					}
					if time.Since(committed) > feedBound {
						b.Errorf("%s: not seen by %s within %s", s.kind, base, feedBound)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		lat[s.kind] = append(lat[s.kind], worst)
		all = append(all, worst)
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	b.ReportMetric(pct(all, 0.5).Seconds(), "p50-s")
	b.ReportMetric(pct(all, 0.99).Seconds(), "p99-s")
	b.ReportMetric(float64(len(all)), "changes")
	for k, d := range lat {
		b.Logf("%-32s n=%3d p50 %v max %v", k, len(d), pct(d, 0.5).Round(time.Millisecond), pct(d, 1).Round(time.Millisecond))
	}
	b.Logf("all: n=%d p50 %v p99 %v max %v", len(all), pct(all, 0.5).Round(time.Millisecond), pct(all, 0.99).Round(time.Millisecond), pct(all, 1).Round(time.Millisecond))
}
