package figure

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// New returns a plot whose text is all in Liberation Sans.
func New() *plot.Plot {
	p := plot.New()
	for _, st := range []*font.Font{
		&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font,
	} {
		st.Typeface, st.Variant = sans.Typeface, sans.Variant
	}
	return p
}

// legendGap separates the data area from the legend.
const legendGap = vg.Length(8)

// Save draws p with its legend, if any, in a column to the right of the
// plot (the data area shrinks to make room), and writes it to file in the
// format its extension names (.svg, .png, .pdf, .eps, .jpg, .tif).
func Save(p *plot.Plot, w, h vg.Length, file string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), ".")
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("plot %s: %w", file, err)
	}
	dc := draw.New(c)
	// The title spans the whole width (shrunk to fit it), above both the
	// plot and the legend.
	title := p.Title.Text
	legend := p.Legend
	p.Title.Text, p.Legend = "", plot.NewLegend() // drawn here instead
	defer func() { p.Title.Text, p.Legend = title, legend }()
	top := vg.Length(0)
	if title != "" {
		sty := p.Title.TextStyle
		for sty.Rectangle(title).Size().X > w-2*legendGap && sty.Font.Size > 6 {
			sty.Font.Size *= 0.92
		}
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
		dc.FillText(sty, vg.Point{X: w / 2, Y: h - legendGap/2}, title)
		top = sty.Rectangle(title).Size().Y + legendGap
	}
	r := legend.Rectangle(dc)
	lw := r.Max.X - r.Min.X
	if lw > 0 {
		lw += 2 * legendGap // before it, and a margin after it
	}
	p.Draw(draw.Crop(dc, 0, -lw, 0, -top))
	if lw > 0 {
		legend.Left, legend.Top, legend.XOffs, legend.YOffs = true, true, 0, 0
		legend.Draw(draw.Crop(dc, w-lw+legendGap, 0, 0, -top))
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("plot %s: %w", file, err)
	}
	out := buf.Bytes()
	if format == "svg" {
		out = svgFamily.ReplaceAll(out, []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	}
	return os.WriteFile(file, out, 0o644)
}

// svgFamily is the font-family gonum's SVG canvas writes for Liberation Sans.
var svgFamily = regexp.MustCompile(`font-family:Liberation Sans;`)
