package bfcdump

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// HumanBytes formats n as TensorFlow's strings::HumanReadableNumBytes does,
// the sizes of its OOM logs: below 1024 a plain count ("512B"); otherwise
// binary units, KiB with one decimal ("23.5KiB") and MiB and up with two
// ("765.00MiB", "2.16GiB"). Like TF, it divides by 1024 in integers until
// the value is below 1 MiB of the unit and only then formats the last step
// as a fraction, so it truncates at each whole step before rounding the
// last. A negative n gets a leading '-'; math.MinInt64 prints as TF's "-8E".
func HumanBytes(n int64) string {
	if n == math.MinInt64 {
		return "-8E"
	}
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	if n < 1024 {
		return fmt.Sprintf("%s%dB", sign, n)
	}
	const units = "KMGTPE"
	u := 0
	for n >= 1024*1024 {
		n /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%s%.1fKiB", sign, float64(n)/1024)
	}
	return fmt.Sprintf("%s%.2f%ciB", sign, float64(n)/1024, units[u])
}

// humanUnits maps a HumanReadableNumBytes suffix to its multiplier.
var humanUnits = map[string]float64{
	"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60,
}

var humanRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)(B|KiB|MiB|GiB|TiB|PiB|EiB)$`)

// parseHumanBytes reads a size as HumanBytes prints it ("765.00MiB") or as a
// plain count ("802160640"), returning the nearest byte count and whether it
// is exact. HumanBytes loses precision above 1 KiB (up to 5% just above
// 1 KiB, where it keeps one decimal, and 0.5% from 1 MiB up), so an inexact
// result is an approximation.
func parseHumanBytes(s string) (n uint64, exact, ok bool) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, true, true
	}
	m := humanRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false, false
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false, false
	}
	mult := humanUnits[m[2]]
	v := math.Round(f * mult)
	if v >= math.MaxUint64 {
		return 0, false, false
	}
	return uint64(v), m[2] == "B", true
}
