package figure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestSave(t *testing.T) {
	dir := t.TempDir()
	p := New()
	p.Title.Text = "a title"
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(l)
	p.Legend.Add("a rather long legend entry", l)
	for _, tc := range []struct {
		file string
		want string // in the file
		err  bool
	}{
		{"p.svg", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;", false},
		{"p.png", "\x89PNG", false},
		{"p.pdf", "%PDF", false},
		{"p.bmp", "", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			file := filepath.Join(dir, tc.file)
			err := Save(p, 4*vg.Inch, 3*vg.Inch, file)
			if (err != nil) != tc.err {
				t.Fatalf("error %v", err)
			}
			if tc.err {
				return
			}
			raw, _ := os.ReadFile(file)
			if !strings.Contains(string(raw), tc.want) {
				t.Errorf("%s lacks %q", tc.file, tc.want)
			}
			if strings.Contains(string(raw), "font-family:Liberation Serif") || strings.Contains(string(raw), "font-family:Liberation Sans;") {
				t.Errorf("%s names a font without fallbacks", tc.file)
			}
		})
	}
}
