package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// Chart layout, in SVG user units.
const (
	chartWidth  = 980
	chartLeft   = 200 // workload labels
	chartRight  = 90  // value labels
	chartTop    = 64  // title and legend
	chartBottom = 40  // axis labels
	barHeight   = 11
	barGap      = 2
	groupGap    = 12
)

var chartColors = map[string]string{
	"mqlite": "#1f77b4", "jetstream": "#2ca02c", "bbolt": "#ff7f0e", "wal": "#9467bd", "pebble": "#8c564b",
}

func chartColor(system string, i int) string {
	if c, ok := chartColors[system]; ok {
		return c
	}
	return []string{"#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}[i%4]
}

// WriteChart draws the throughput of every produce and consume row as
// horizontal bars on a log scale, one group per workload, one bar per
// system (mqlite's consume rows: its push consumer), using only the
// standard library.
func WriteChart(w io.Writer, rows []Result, title string) error {
	var groups []string
	var systems []string
	val := map[[2]string]float64{}
	lo, hi := math.Inf(1), 0.0
	for _, r := range rows {
		if (r.Job.Kind != KindProduce && r.Job.Kind != KindConsume) || r.Err != "" || r.MsgsPerSec() <= 0 {
			continue
		}
		wl := r.Job.Workload()
		if !slices.Contains(groups, wl) {
			groups = append(groups, wl)
		}
		if rd := Readers(r.Job.System); r.Job.Reader != "" && len(rd) > 0 && r.Job.Reader != rd[0] {
			continue // one bar per system: its first reader (mqlite push); the table has the others
		}
		if !slices.Contains(systems, r.Job.System) {
			systems = append(systems, r.Job.System)
		}
		v := r.MsgsPerSec()
		val[[2]string{wl, r.Job.System}] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(groups) == 0 {
		lo, hi = 1, 10
	}
	minExp, maxExp := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if maxExp <= minExp {
		maxExp = minExp + 1
	}
	plotW := float64(chartWidth - chartLeft - chartRight)
	x := func(v float64) float64 { return (math.Log10(v) - minExp) / (maxExp - minExp) * plotW }
	groupH := len(systems)*(barHeight+barGap) + groupGap
	height := chartTop + len(groups)*groupH + chartBottom

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", chartLeft, html.EscapeString(title))
	for i, s := range systems {
		lx := chartLeft + i*110
		fmt.Fprintf(&b, `<rect x="%d" y="32" width="12" height="12" fill="%s"/><text x="%d" y="42">%s</text>`+"\n",
			lx, chartColor(s, i), lx+16, html.EscapeString(s))
	}
	plotBottom := height - chartBottom
	for e := minExp; e <= maxExp; e++ {
		gx := float64(chartLeft) + x(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, chartTop-6, gx, plotBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", gx, plotBottom+14, axisLabel(int(e)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">messages per second (log scale)</text>`+"\n",
		float64(chartLeft)+plotW/2, plotBottom+30)
	for gi, g := range groups {
		y0 := chartTop + gi*groupH
		mid := y0 + len(systems)*(barHeight+barGap)/2 + 4
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", chartLeft-8, mid, html.EscapeString(g))
		for si, s := range systems {
			v, ok := val[[2]string{g, s}]
			if !ok {
				continue
			}
			y := y0 + si*(barHeight+barGap)
			bw := max(x(v), 1)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %s msgs/s</title></rect>`+"\n",
				chartLeft, y, bw, barHeight, chartColor(s, si), html.EscapeString(s), html.EscapeString(g), fmtRate(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9">%s</text>`+"\n", float64(chartLeft)+bw+3, y+barHeight-2, fmtRate(v))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// axisLabel names the decade 10^e: 1, 10, 100, 1K, ... 10M, 1G.
func axisLabel(e int) string {
	units := []string{"", "K", "M", "G", "T"}
	u := min(max(e, 0)/3, len(units)-1)
	n := 1
	for range e - 3*u {
		n *= 10
	}
	return fmt.Sprintf("%d%s", n, units[u])
}
