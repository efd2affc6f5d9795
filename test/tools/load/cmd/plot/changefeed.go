package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The change feed's figures (plot -changefeed), drawn from the JSON that
// BenchmarkChangeFeedBulk in cmd/dirgate writes (DIRGATE_BULK_JSON):
//
//	changefeed-bulk.png       the distribution (CDF) of the time from a change's
//	                          write returning to both instances answering it, one
//	                          line per polled phase of each file
//	changefeed-bulk-time.png  each change's latency against when it was written:
//	                          whether the feed keeps up through the run
//
//	go run ./test/tools/load/cmd/plot -changefeed -out docs/img bulk=/tmp/bulk.json

// bulkRun is what plot reads of one bulk JSON file.
type bulkRun struct {
	label   string
	Changes int `json:"changes"`
	Phases  []struct {
		Name    string `json:"name"`
		Repeat  int    `json:"repeat"`
		Samples []struct {
			Committed float64 `json:"committedS"`
			Latency   float64 `json:"latencyS"`
		} `json:"samples"`
	} `json:"phases"`
}

// bulkSeries is one polled phase's latencies (-1: never seen) by commit time.
type bulkSeries struct {
	label     string
	committed []float64
	latency   []float64
}

func drawChangeFeed(out string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no LABEL=FILE given")
	}
	var series []bulkSeries
	for _, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q is not LABEL=FILE", a)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r bulkRun
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		polled := 0
		for _, ph := range r.Phases {
			if len(ph.Samples) > 0 {
				polled++
			}
		}
		if polled == 0 {
			return fmt.Errorf("%s: no phase with samples: not the output of BenchmarkChangeFeedBulk's feed-polled phase", path)
		}
		for _, ph := range r.Phases {
			if len(ph.Samples) == 0 {
				continue
			}
			s := bulkSeries{label: label}
			if polled > 1 {
				s.label = fmt.Sprintf("%s, run %d", label, ph.Repeat+1)
			}
			for _, v := range ph.Samples {
				s.committed = append(s.committed, v.Committed)
				s.latency = append(s.latency, v.Latency)
			}
			series = append(series, s)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := bulkCDF(filepath.Join(out, "changefeed-bulk.png"), series); err != nil {
		return err
	}
	return bulkOverTime(filepath.Join(out, "changefeed-bulk-time.png"), series)
}

var seriesColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// bulkCDF draws, for each series, the share of changes seen on both instances
// within x seconds; changes never seen keep the line below 1.
func bulkCDF(path string, series []bulkSeries) error {
	p := plot.New()
	p.Title.Text = "Change feed under a bulk change: from the write to both replicas' answer"
	p.X.Label.Text = "seconds after the change's write returned"
	p.Y.Label.Text = "share of changes seen on both instances"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	xmax := 0.0
	for i, s := range series {
		seen := slices.DeleteFunc(slices.Clone(s.latency), func(v float64) bool { return v < 0 })
		slices.Sort(seen)
		var xys plotter.XYs
		for j, v := range seen {
			xys = append(xys, plotter.XY{X: v, Y: float64(j+1) / float64(len(s.latency))})
		}
		if len(xys) == 0 {
			continue
		}
		xmax = max(xmax, seen[len(seen)-1])
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = seriesColors[i%len(seriesColors)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s: p50 %s, p99 %s", s.label, secs(pct(s.latency, 0.5)), secs(pct(s.latency, 0.99))), line)
	}
	p.X.Min, p.X.Max = 0, math.Ceil(xmax)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// bulkOverTime draws each change's latency at its commit time.
func bulkOverTime(path string, series []bulkSeries) error {
	p := plot.New()
	p.Title.Text = "Change feed under a bulk change: each change's latency"
	p.X.Label.Text = "seconds into the run (the change's write returned)"
	p.Y.Label.Text = "seconds until both instances answer it"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	for i, s := range series {
		var xys plotter.XYs
		for j, v := range s.latency {
			if v >= 0 {
				xys = append(xys, plotter.XY{X: s.committed[j], Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.Color = seriesColors[i%len(seriesColors)]
		sc.Shape, sc.Radius = draw.CircleGlyph{}, vg.Points(1)
		p.Add(sc)
		p.Legend.Add(s.label, sc)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// pct is the nearest-rank percentile of v, a never-seen change (-1) ranking above
// every seen one (+Inf).
func pct(v []float64, p float64) float64 {
	d := slices.Clone(v)
	for i := range d {
		if d[i] < 0 {
			d[i] = math.Inf(1)
		}
	}
	slices.Sort(d)
	return d[max(0, int(math.Ceil(p*float64(len(d))))-1)]
}

// secs writes a percentile; one that falls on a change never seen is "never".
func secs(v float64) string {
	if math.IsInf(v, 1) {
		return "never"
	}
	return fmt.Sprintf("%.2f s", v)
}
