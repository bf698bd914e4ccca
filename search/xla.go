package search

import (
	"math"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/sim"
)

// JAXSource is the header source of a trace imported from a JAX capture.
const JAXSource = "jax-profiler"

// xlaSettings are the settings of XLA's allocator that JAX lets a user
// set: whether it preallocates (XLA_PYTHON_CLIENT_PREALLOCATE); it has no
// switch for garbage collection, which stays off.
var xlaSettings = []Setting{{"allow_growth", []string{"false", "true"}, "", ""}}

// advisedSettings are the settings Advise searches for allocator on a
// trace whose header gave setup: a JAX capture's bfc has only XLA's.
func advisedSettings(setup sim.Setup, allocator string) ([]Setting, bool) {
	if allocator == "bfc" && setup.Source == JAXSource {
		return xlaSettings, true
	}
	s, ok := AdvisedSettings[allocator]
	return s, ok
}

// IsJAX says whether the trace is a JAX capture's.
func (t *Trace) IsJAX() bool { return t.Setup.Source == JAXSource }

// XLAFraction returns the smallest XLA_PYTHON_CLIENT_MEM_FRACTION, to
// three significant digits, that gives XLA's allocator at least limit
// bytes on a GPU of total bytes: XLA takes size_t(total × fraction) as
// its memory limit. ok is false when limit is more than the GPU has.
func XLAFraction(limit, total uint64) (fraction string, ok bool) {
	if total == 0 || limit > total {
		return "", false
	}
	f := float64(limit) / float64(total)
	scale := math.Pow(10, float64(2-int(math.Floor(math.Log10(f)))))
	// From just below, up a step of the third digit at a time, so that
	// float rounding never skips the smallest that gives the limit.
	n := math.Floor(f*scale) - 1
	for uint64(float64(total)*(n/scale)) < limit {
		n++
	}
	up := n / scale
	if up > 1 {
		return "", false
	}
	return strconv.FormatFloat(up, 'f', -1, 64), true
}

// XLAEnv returns the line that runs JAX with XLA's allocator set as
// settings say (allow_growth: XLA_PYTHON_CLIENT_PREALLOCATE=false) and a
// memory limit of at least limit bytes on a GPU of total bytes
// (XLA_PYTHON_CLIENT_MEM_FRACTION); without total, the fraction is left
// out. ok is false when the limit is more than the GPU has.
func XLAEnv(settings map[string]string, limit, total uint64) (line string, ok bool) {
	var parts []string
	if settings["allow_growth"] == "true" {
		parts = append(parts, "XLA_PYTHON_CLIENT_PREALLOCATE=false")
	}
	ok = true
	if total > 0 && limit > 0 {
		var f string
		if f, ok = XLAFraction(limit, total); ok {
			parts = append(parts, "XLA_PYTHON_CLIENT_MEM_FRACTION="+f)
		}
	}
	if len(parts) == 0 {
		return "unset XLA_PYTHON_CLIENT_PREALLOCATE", ok
	}
	return "export " + strings.Join(parts, " "), ok
}
