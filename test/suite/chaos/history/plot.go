package history

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Rows of operations, top to bottom, in the order a reader follows a run: what
// clients saw, what was written, tokens, the accounts.
var plotKinds = []string{List, listNested, Remove, Add, DirectRemove, DirectAdd, SignIn, UseTok, Revoke, Disable, Enable}

const listNested = "list (nested)"

var faultColors = []color.Color{
	color.RGBA{0x4c, 0x72, 0xb0, 0xff}, // blue
	color.RGBA{0x8c, 0x56, 0x4b, 0xff}, // brown
	color.RGBA{0x55, 0xa8, 0x68, 0xff}, // green
	color.RGBA{0x81, 0x72, 0xb3, 0xff}, // purple
	color.RGBA{0xcc, 0xb9, 0x74, 0xff}, // sand
	color.RGBA{0x64, 0xb5, 0xcd, 0xff}, // cyan
	color.RGBA{0xda, 0x8b, 0xc3, 0xff}, // pink
	color.RGBA{0x8c, 0x8c, 0x8c, 0xff}, // grey
}

var (
	okColor      = color.RGBA{0x70, 0x80, 0x90, 0xff}
	refusedColor = color.RGBA{0x9b, 0x59, 0xb6, 0xff}
	failedColor  = color.RGBA{0xf3, 0x9c, 0x12, 0xff}
	anomalyColor = color.RGBA{0xe0, 0x10, 0x10, 0xff}
)

// opClass sorts an operation for the plot: answered as asked, refused (a 4xx, an
// LDAP error: a definite answer), or failed (no answer, a 5xx, never ended).
func opClass(o *Op) int {
	switch o.Kind {
	case DirectAdd, DirectRemove, Disable, Enable:
		switch writeOutcome(o) {
		case unknown:
			return 2
		case applied:
			return 0
		}
		if o.Status == 16 || o.Status == 20 {
			return 0
		}
		return 1
	}
	switch {
	case !o.Done() || o.Status == 0 || o.Status >= 500:
		return 2
	case o.Status >= 200 && o.Status < 300:
		return 0
	default:
		return 1
	}
}

func rowKind(o *Op) string {
	if o.Kind == List && o.Nested {
		return listNested
	}
	return o.Kind
}

// Plot draws the run as a timeline PNG at path: x is seconds since the first
// operation started; the top rows are the fault targets, a bar while each was
// faulted; below, one row per kind of operation, a point at each start (grey
// answered, purple refused, orange crosses failed or unanswered); red rings mark
// the operations the checker found anomalies in, labelled by kind.
func Plot(ops []Op, r Report, path string) error {
	if len(ops) == 0 {
		return fmt.Errorf("history: plot: no operations")
	}
	t0 := startOf(&ops[0])
	tEnd := t0
	for i := range ops {
		t0 = min(t0, startOf(&ops[i]))
		tEnd = max(tEnd, startOf(&ops[i]))
		if e := endOf(&ops[i]); e != inf {
			tEnd = max(tEnd, e)
		}
	}
	sec := func(t int64) float64 {
		if t == inf {
			t = tEnd
		}
		return float64(t-t0) / 1e9
	}

	// Rows: fault targets, then kinds, as present in the run.
	var targets []string
	seenTarget := map[string]bool{}
	kindsSeen := map[string]bool{}
	for i := range ops {
		o := &ops[i]
		if o.Kind == Fault {
			for _, t := range o.Targets {
				if !seenTarget[t] {
					seenTarget[t] = true
					targets = append(targets, t)
				}
			}
			continue
		}
		kindsSeen[rowKind(o)] = true
	}
	sort.Strings(targets)
	kindCount := map[string]int{}
	for _, a := range r.Anomalies {
		kindCount[a.Kind]++
	}
	var anomalyRows []string
	for _, k := range anomalyKinds {
		if kindCount[k] > 0 {
			anomalyRows = append(anomalyRows, anomalyRow(k, kindCount[k]))
		}
	}
	var extraKinds []string
	for k := range kindCount {
		if !slices.Contains(anomalyKinds, k) {
			extraKinds = append(extraKinds, k)
		}
	}
	sort.Strings(extraKinds)
	for _, k := range extraKinds {
		anomalyRows = append(anomalyRows, anomalyRow(k, kindCount[k]))
	}
	var rows []string
	rows = append(rows, anomalyRows...)
	rows = append(rows, targets...)
	for _, k := range plotKinds {
		if kindsSeen[k] {
			rows = append(rows, k)
			delete(kindsSeen, k)
		}
	}
	var other []string
	for k := range kindsSeen {
		other = append(other, k)
	}
	sort.Strings(other)
	rows = append(rows, other...)
	rowY := map[string]float64{}
	var ticks []plot.Tick
	for i, name := range rows {
		y := float64(len(rows) - 1 - i)
		rowY[name] = y
		ticks = append(ticks, plot.Tick{Value: y, Label: name})
	}

	p := plot.New()
	// The legend is drawn beside the plot, not over the points.
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	p.Title.Text = fmt.Sprintf("%d operations, %d faults, %s", len(ops)-r.Faults, r.Faults, anomalySummary(r.Anomalies))
	p.X.Label.Text = "seconds since the first operation started"
	p.X.Tick.Marker = secondTicks{}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.7, float64(len(rows))-0.3
	p.X.Min, p.X.Max = 0, max(sec(tEnd), 1)
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	p.Add(grid)
	// Dashed lines between anomalies, faults and operations.
	for i, n := range []int{len(anomalyRows), len(anomalyRows) + len(targets)} {
		if n == 0 || n == len(rows) || i == 1 && len(targets) == 0 {
			continue
		}
		y := float64(len(rows)-n) - 0.5
		sep, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}})
		if err != nil {
			return fmt.Errorf("history: plot: %w", err)
		}
		sep.Color, sep.Dashes = color.Gray{0x99}, []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(sep)
	}

	// Faults: one bar per target hit, coloured by the fault's name.
	faultColor := map[string]color.Color{}
	var faultNames []string
	for i := range ops {
		o := &ops[i]
		if o.Kind != Fault {
			continue
		}
		c, ok := faultColor[o.Fault]
		if !ok {
			c = faultColors[len(faultColor)%len(faultColors)]
			faultColor[o.Fault] = c
			faultNames = append(faultNames, o.Fault)
		}
		for _, t := range o.Targets {
			y := rowY[t]
			bar, err := plotter.NewLine(plotter.XYs{{X: sec(startOf(o)), Y: y}, {X: max(sec(endOf(o)), sec(startOf(o))+0.05), Y: y}})
			if err != nil {
				return fmt.Errorf("history: plot: %w", err)
			}
			bar.Color, bar.Width = c, vg.Points(9)
			p.Add(bar)
		}
	}

	// Operations, spread a little within their row so that density shows.
	var pts [3]plotter.XYs
	byID := map[int64]*Op{}
	for i := range ops {
		o := &ops[i]
		byID[o.ID] = o
		if o.Kind == Fault {
			continue
		}
		c := opClass(o)
		pts[c] = append(pts[c], plotter.XY{X: sec(startOf(o)), Y: rowY[rowKind(o)] + jitter(o.ID)})
	}
	styles := [3]draw.GlyphStyle{
		{Color: okColor, Radius: vg.Points(1.2), Shape: draw.CircleGlyph{}},
		{Color: refusedColor, Radius: vg.Points(2), Shape: draw.TriangleGlyph{}},
		{Color: failedColor, Radius: vg.Points(2.5), Shape: draw.CrossGlyph{}},
	}
	names := [3]string{"answered", "refused (4xx, LDAP error)", "failed (5xx, no answer)"}
	for c := range pts {
		if len(pts[c]) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts[c])
		if err != nil {
			return fmt.Errorf("history: plot: %w", err)
		}
		s.GlyphStyle = styles[c]
		p.Add(s)
		thumb := *s
		thumb.GlyphStyle.Radius = vg.Points(3)
		legend.Add(fmt.Sprintf("%s (%d)", names[c], len(pts[c])), &thumb)
	}
	for _, name := range faultNames {
		l, err := plotter.NewLine(plotter.XYs{})
		if err != nil {
			return fmt.Errorf("history: plot: %w", err)
		}
		l.Color, l.Width = faultColor[name], vg.Points(6)
		legend.Add(name, l)
	}

	// Anomalies: a point in its kind's row, and a red ring on the operation
	// that saw it.
	if len(r.Anomalies) > 0 {
		var ring, dots plotter.XYs
		for _, a := range r.Anomalies {
			o := byID[a.Op]
			if o == nil {
				continue
			}
			x := sec(startOf(o))
			ring = append(ring, plotter.XY{X: x, Y: rowY[rowKind(o)]})
			dots = append(dots, plotter.XY{X: x, Y: rowY[anomalyRow(a.Kind, kindCount[a.Kind])] + jitter(o.ID)})
		}
		if len(ring) > 0 {
			s, err := plotter.NewScatter(ring)
			if err != nil {
				return fmt.Errorf("history: plot: %w", err)
			}
			s.GlyphStyle = draw.GlyphStyle{Color: anomalyColor, Radius: vg.Points(5), Shape: draw.RingGlyph{}}
			p.Add(s)
			d, err := plotter.NewScatter(dots)
			if err != nil {
				return fmt.Errorf("history: plot: %w", err)
			}
			d.GlyphStyle = draw.GlyphStyle{Color: anomalyColor, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(d)
			legend.Add(fmt.Sprintf("anomaly (%d), operation ringed", len(r.Anomalies)), s)
		}
	}

	const legendWidth = 3.2 * vg.Inch
	w, h := 16*vg.Inch, vg.Length(len(rows))*0.4*vg.Inch+2.5*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, vg.Points(12), -legendWidth, 0, 0)) // room for the longest row name
	legend.Draw(draw.Crop(dc, w-legendWidth+vg.Points(8), 0, 0, -vg.Points(30)))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("history: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("history: plot %s: %w", path, err)
	}
	return nil
}

// anomalyKinds orders the anomaly rows: what was read wrong, then tokens, then
// availability.
var anomalyKinds = []string{LostWrite, StaleRead, Resurrection, Phantom, RevokedTokenAccepted, DisabledTokenAccepted, Unavailable, BadFailure}

func anomalyRow(kind string, n int) string { return fmt.Sprintf("%s (%d)", kind, n) }

// jitter spreads the points of one row over ±0.3 of it, the same for an
// operation every time the run is drawn.
func jitter(id int64) float64 {
	h := uint64(id) * 0x9e3779b97f4a7c15
	return (float64(h>>40)/float64(1<<24) - 0.5) * 0.6
}

func anomalySummary(as []Anomaly) string {
	if len(as) == 0 {
		return "no anomalies"
	}
	n := map[string]int{}
	for _, a := range as {
		n[a.Kind]++
	}
	return fmt.Sprintf("%d anomalies: %s", len(as), countKinds(n))
}

// countKinds lists kinds with their counts, most first.
func countKinds(n map[string]int) string {
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if n[kinds[i]] != n[kinds[j]] {
			return n[kinds[i]] > n[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	lines := make([]string, len(kinds))
	for i, k := range kinds {
		lines[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	return strings.Join(lines, ", ")
}

// secondTicks marks the time axis about every fifteenth of the run, at a round
// number of seconds.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600} {
		step = s
		if (hi-lo)/s <= 15 {
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ticks
}
