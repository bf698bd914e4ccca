// Package textwrap breaks report prose into lines, keeping a size's number
// and unit ("128 MiB") on one line.
package textwrap

import "strings"

// Lines breaks text into lines of at most width columns at spaces; a word
// longer than width gets a line of its own. A unit of bytes (B,
// KiB … EiB) stays with the number before it.
func Lines(text string, width int) []string {
	var words []string
	for _, w := range strings.Fields(text) {
		if n := len(words); n > 0 && isUnit(w) && endsInDigit(words[n-1]) {
			words[n-1] += " " + w
			continue
		}
		words = append(words, w)
	}
	var lines []string
	var cur strings.Builder
	for _, word := range words {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

func isUnit(w string) bool {
	switch strings.TrimRight(w, ".,;:)") {
	case "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB":
		return true
	}
	return false
}

func endsInDigit(w string) bool {
	c := w[len(w)-1]
	return '0' <= c && c <= '9'
}
