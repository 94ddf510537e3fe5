package console

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// The Traffic page's charts are SVG drawn here: line charts with axes, a
// legend and gaps where a series has no value (NaN), sparklines, and
// bars. Every text is escaped; colours come from the style sheet through
// the classes s0…s5 (series) so that the markup has no style attribute
// (the console's CSP admits no inline style).

// chartSeries is one line of a chart.
type chartSeries struct {
	Name   string
	Points []float64
}

const maxSeriesClasses = 6

// Chart geometry (SVG user units).
const (
	chartW, chartH             = 640, 200
	plotL, plotR, plotT, plotB = 56, 628, 14, 170
	labelOffset                = 6
	sparkW, sparkH             = 120, 24
	barW, barLabel, barRowH    = 360, 70, 22
)

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least
// floor).
func niceCeil(v, floor float64) float64 {
	if !(v > floor) {
		v = floor
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// axisText formats an axis value with its unit.
func axisText(v float64, unit string) string {
	switch unit {
	case "%":
		return strconv.FormatFloat(100*v, 'f', -1, 64) + "%"
	case "ms":
		if v >= 1000 {
			return strconv.FormatFloat(v/1000, 'g', 3, 64) + "s"
		}
		return strconv.FormatFloat(v, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + unit
}

// agoText labels a time axis point d before now ("-15m", "-30s").
func agoText(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("-%dm", int(d.Minutes()))
	}
	return "-" + d.Round(time.Second).String()
}

// lineChart draws series over a time window ending now. unit is "/s",
// "%" (values are shares, the axis tops at 100%) or "ms". floor is the
// smallest axis top.
func lineChart(label, unit string, window time.Duration, floor float64, series []chartSeries) template.HTML {
	top := floor
	n := 0
	for _, s := range series {
		n = max(n, len(s.Points))
		for _, v := range s.Points {
			if !math.IsNaN(v) && v > top {
				top = v
			}
		}
	}
	if unit == "%" {
		top = 1
	} else {
		top = niceCeil(top, floor)
	}
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, chartW, chartH, esc(label), esc(label))
	// Grid and y axis labels at 0, ½ and the top.
	for _, f := range []float64{0, 0.5, 1} {
		y := plotB - f*(plotB-plotT)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%s" x2="%d" y2="%s"/>`, plotL, num(y), plotR, num(y))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%s" text-anchor="end">%s</text>`, plotL-labelOffset, num(y+4), esc(axisText(f*top, unit)))
	}
	// x axis labels: the window's start, middle and now.
	for _, f := range []float64{0, 0.5, 1} {
		x := plotL + f*(plotR-plotL)
		anchor := "middle"
		if f == 0 {
			anchor = "start"
		} else if f == 1 {
			anchor = "end"
		}
		ago := time.Duration((1 - f) * float64(window))
		fmt.Fprintf(&b, `<text class="axis" x="%s" y="%d" text-anchor="%s">%s</text>`, num(x), plotB+16, anchor, esc(agoText(ago)))
	}
	// The lines; a NaN point breaks a line.
	step := 0.0
	if n > 1 {
		step = float64(plotR-plotL) / float64(n-1)
	}
	for i, s := range series {
		class := fmt.Sprintf("s%d", i%maxSeriesClasses)
		var pts []string
		flush := func() {
			if len(pts) == 1 {
				// A lone point: a dot.
				xy := strings.Split(pts[0], ",")
				fmt.Fprintf(&b, `<circle class="dot %s" cx="%s" cy="%s" r="2"/>`, class, xy[0], xy[1])
			} else if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, class, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		off := n - len(s.Points) // right-align shorter series
		for j, v := range s.Points {
			if math.IsNaN(v) {
				flush()
				continue
			}
			x := plotL + float64(off+j)*step
			if n == 1 {
				x = plotR
			}
			y := plotB - math.Min(v/top, 1)*(plotB-plotT)
			pts = append(pts, num(x)+","+num(y))
		}
		flush()
	}
	b.WriteString(`</svg>`)
	// The legend, as HTML beside the chart (it wraps).
	if len(series) > 1 || (len(series) == 1 && series[0].Name != "") {
		b.WriteString(`<ul class="legend">`)
		for i, s := range series {
			fmt.Fprintf(&b, `<li><span class="key s%d"></span>%s</li>`, i%maxSeriesClasses, esc(s.Name))
		}
		b.WriteString(`</ul>`)
	}
	return template.HTML(b.String()) // every text above is escaped
}

// sparkline draws one series small, without axes.
func sparkline(points []float64) template.HTML {
	top := 0.0
	for _, v := range points {
		if v > top {
			top = v
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %d %d" aria-hidden="true">`, sparkW, sparkH)
	if len(points) > 1 && top > 0 {
		step := float64(sparkW-2) / float64(len(points)-1)
		pts := make([]string, 0, len(points))
		for i, v := range points {
			y := float64(sparkH-2) - (v/top)*float64(sparkH-4)
			pts = append(pts, num(1+float64(i)*step)+","+num(y))
		}
		fmt.Fprintf(&b, `<polyline class="line s0" points="%s"/>`, strings.Join(pts, " "))
	} else {
		fmt.Fprintf(&b, `<line class="grid" x1="1" y1="%d" x2="%d" y2="%d"/>`, sparkH-2, sparkW-1, sparkH-2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// bar is one row of a bar chart.
type bar struct {
	Label string
	Value int
	Class string // a CSS class for its colour
}

// barChart draws horizontal bars with their labels and values.
func barChart(label string, bars []bar) template.HTML {
	top := 0
	for _, br := range bars {
		top = max(top, br.Value)
	}
	h := barRowH*len(bars) + 4
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="bars" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, barW+barLabel+60, h, esc(label), esc(label))
	for i, br := range bars {
		y := i*barRowH + 2
		w := 0.0
		if top > 0 {
			w = float64(barW) * float64(br.Value) / float64(top)
		}
		fmt.Fprintf(&b, `<text class="axis" x="0" y="%d">%s</text>`, y+14, esc(br.Label))
		fmt.Fprintf(&b, `<rect class="bar %s" x="%d" y="%d" width="%s" height="%d"/>`, esc(br.Class), barLabel, y+2, num(w), barRowH-6)
		fmt.Fprintf(&b, `<text class="axis" x="%s" y="%d">%d</text>`, num(float64(barLabel)+w+6), y+14, br.Value)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
