// Package figure makes the project's plots readable anywhere: text in
// Liberation Sans, which is metric-compatible with Arial and Helvetica and
// named with them (and sans-serif) as fallbacks in SVG files, so a machine
// without the font lays the text out in the same width; and the legend
// beside the data area, never over a line.
package figure
