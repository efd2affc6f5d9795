// Command plot draws the large-listing figures of docs/benchmarks.md from the JSON
// that the load tool's large runs write (bench -members ... -json FILE):
//
//	large-cpu.png         server CPU per request against members, dirgate beside the
//	                      bare server writing the same bytes, one line per coding
//	large-cpu-member.png  the same per member: a flat line is no cliff
//	large-memory.png      dirgate's resident memory against members (loaded, after
//	                      serving, and what serving added after it and at its
//	                      peak), beside the export's and the body's size
//
// Each argument is LABEL=FILE; the label names the run in the legends (e.g. the
// cache bound it ran with). The memory figure is drawn from the first run.
//
//	go run ./test/tools/load/cmd/plot -out docs/img default=large.json 64MiB=large-64.json
//
// With -changefeed it draws the change feed's figures instead (changefeed.go).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// run is what plot reads of one JSON file.
type run struct {
	label   string
	Options struct {
		Encodings []string `json:"encodings"`
	} `json:"options"`
	Sizes []struct {
		Members   int                `json:"members"`
		LDIFBytes float64            `json:"ldifBytes"`
		Loaded    memory             `json:"loaded"`
		Served    memory             `json:"served"`
		Bodies    map[string]float64 `json:"bodyBytes"`
	} `json:"sizes"`
	Summary []struct {
		Workload  string  `json:"workload"`
		Target    string  `json:"target"`
		ServerCPU float64 `json:"serverCpuUsPerRequest"`
	} `json:"summary"`
}

type memory struct {
	RSS  float64 `json:"rssBytes"`
	Peak float64 `json:"peakBytes"`
}

func main() {
	out := flag.String("out", "docs/img", "directory to write the PNGs to")
	feed := flag.Bool("changefeed", false, "draw the change feed's figures from BenchmarkChangeFeedBulk's JSON instead (changefeed.go)")
	flag.Parse()
	draw := drawAll
	if *feed {
		draw = drawChangeFeed
	}
	if err := draw(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func drawAll(out string, args []string) error {
	if len(args) == 0 {
		return errors.New("no LABEL=FILE given")
	}
	var runs []*run
	for _, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q is not LABEL=FILE", a)
		}
		r, err := read(path)
		if err != nil {
			return err
		}
		r.label = label
		runs = append(runs, r)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := cpu(filepath.Join(out, "large-cpu.png"), runs, false); err != nil {
		return err
	}
	if err := cpu(filepath.Join(out, "large-cpu-member.png"), runs, true); err != nil {
		return err
	}
	return mem(filepath.Join(out, "large-memory.png"), runs[0])
}

func read(path string) (*run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Sizes) == 0 {
		return nil, fmt.Errorf("%s: no sizes: not the output of bench -members", path)
	}
	return &r, nil
}

// serverCPU is target's median server CPU per request, in µs, for n members in enc.
func (r *run) serverCPU(target string, n int, enc string) (float64, bool) {
	w := fmt.Sprintf("list%d-%s", n, enc)
	for _, s := range r.Summary {
		if s.Workload == w && s.Target == target && s.ServerCPU > 0 {
			return s.ServerCPU, true
		}
	}
	return 0, false
}

var codingColor = map[string]color.Color{
	"identity": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"gzip":     color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"zstd":     color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// cpu draws server CPU per request (perMember: per member, in ns) against members:
// the bare server dashed (from the first run: it is the same bytes in every run),
// each run's dirgate solid, with its own marker.
func cpu(path string, runs []*run, perMember bool) error {
	p := plot.New()
	p.X.Label.Text = "members"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	if perMember {
		p.Title.Text = "Server CPU per member of a cached listing"
		p.Y.Label.Text = "ns of server CPU per member"
	} else {
		p.Title.Text = "Server CPU per cached listing"
		p.Y.Label.Text = "µs of server CPU per request"
	}
	// Bottom left for CPU per member (the lines fall to the right), top left for
	// CPU per request (they rise).
	p.Legend.Top, p.Legend.Left = !perMember, true
	scale := func(v float64, n int) float64 {
		if perMember {
			return 1000 * v / float64(n)
		}
		return v
	}
	for _, enc := range runs[0].Options.Encodings {
		for i, r := range append([]*run{nil}, runs...) {
			target, label, src := "dirgate", "", r
			if r == nil {
				target, label, src = "bare", "bare "+enc, runs[0]
			} else {
				label = "dirgate " + enc
				if len(runs) > 1 {
					label += " (" + r.label + ")"
				}
			}
			var xys plotter.XYs
			for _, s := range src.Sizes {
				if v, ok := src.serverCPU(target, s.Members, enc); ok {
					xys = append(xys, plotter.XY{X: float64(s.Members), Y: scale(v, s.Members)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = codingColor[enc], codingColor[enc]
			points.Shape = shapes[i%len(shapes)]
			if r == nil {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line, points)
			p.Legend.Add(label, line, points)
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

var shapes = []draw.GlyphDrawer{draw.CrossGlyph{}, draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PyramidGlyph{}}

// mem draws r's memory figures against members, in MB.
func mem(path string, r *run) error {
	p := plot.New()
	p.Title.Text = "dirgate's resident memory (memory upstream, one cached listing)"
	p.X.Label.Text = "members"
	p.Y.Label.Text = "MB"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false // the lower right is empty
	sizes := slices.Clone(r.Sizes)
	series := []struct {
		name string
		v    func(i int) float64
	}{
		{"RSS after serving", func(i int) float64 { return sizes[i].Served.RSS }},
		{"RSS with the export loaded", func(i int) float64 { return sizes[i].Loaded.RSS }},
		{"LDIF export", func(i int) float64 { return sizes[i].LDIFBytes }},
		{"body (identity)", func(i int) float64 { return sizes[i].Bodies["identity"] }},
		// What serving added: after it, and at its peak (the load's peak is not
		// counted: bench resets it once the export is loaded).
		{"RSS grown by serving: after", func(i int) float64 { return sizes[i].Served.RSS - sizes[i].Loaded.RSS }},
		{"RSS grown by serving: peak", func(i int) float64 { return sizes[i].Served.Peak - sizes[i].Loaded.RSS }},
		{"3 × body", func(i int) float64 { return 3 * sizes[i].Bodies["identity"] }},
	}
	palette := []color.Color{codingColor["identity"], codingColor["zstd"], color.Gray{Y: 0x80}, codingColor["gzip"],
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, color.Gray{Y: 0x40}}
	for j, s := range series {
		var xys plotter.XYs
		for i := range sizes {
			if v := s.v(i); v > 0 {
				xys = append(xys, plotter.XY{X: float64(sizes[i].Members), Y: v / (1 << 20)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = palette[j], palette[j]
		points.Shape = shapes[j%len(shapes)]
		if s.name == "3 × body" {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
	}
	return p.Save(8*vg.Inch, 5.5*vg.Inch, path)
}
