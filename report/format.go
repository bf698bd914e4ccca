package report

import (
	"fmt"
	"strconv"
)

// Bytes formats a byte count the way TensorFlow's HumanReadableNumBytes does,
// with a space before the unit: below 1 KiB in bytes ("512 B"), KiB with one
// decimal ("23.5 KiB"), MiB and larger with two ("765.00 MiB", "2.16 GiB").
func Bytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// Percent formats a fraction as a percentage with one decimal.
func Percent(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// Nanos formats a time in nanoseconds with a unit that keeps 2–4 digits.
func Nanos(ns float64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%.0fns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.1fµs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.1fms", ns/1e6)
	}
	return fmt.Sprintf("%.2fs", ns/1e9)
}

// Seconds formats a duration given in seconds.
func Seconds(s float64) string { return Nanos(s * 1e9) }

// Rate formats events per second: "850k/s", "1.25M/s".
func Rate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM/s", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.0fk/s", r/1e3)
	}
	return fmt.Sprintf("%.0f/s", r)
}

// Plural writes a count and its noun: "1 event", "2 events", "1,234
// events".
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Count(n) + " " + many
}

// Count formats an integer with thousands separators: 1,234,567.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
