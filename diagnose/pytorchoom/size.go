package pytorchoom

import (
	"fmt"
	"math/bits"
	"strconv"
)

// Size is a byte count as PyTorch printed it. c10's format_size prints up to
// 1024 as "N bytes" and larger counts in KiB, MiB or GiB with two decimals,
// so the true count lies within Bytes ± Tolerance.
type Size struct {
	// Bytes is the printed value in bytes, rounded to the nearest byte.
	Bytes uint64
	// Tolerance is half a unit of the last printed digit: 0 for a count in
	// bytes, 0.005 GiB (5.12 MiB, 5368709 bytes) for one printed in GiB.
	Tolerance uint64
	// Printed is the figure as PyTorch printed it, e.g. "1.54 GiB".
	Printed string
}

// Min is the smallest count the printed figure stands for.
func (s Size) Min() uint64 {
	if s.Tolerance > s.Bytes {
		return 0
	}
	return s.Bytes - s.Tolerance
}

// Max is the largest count the printed figure stands for.
func (s Size) Max() uint64 { return satAdd(s.Bytes, s.Tolerance) }

// String is the printed form.
func (s Size) String() string { return s.Printed }

// notAvailable is the smallest count taken for NVML's "not available"
// marker rather than a real figure: NVML reports a process's memory as
// NVML_VALUE_NOT_AVAILABLE (2^64 − 1) where it cannot see it (Windows WDDM,
// some containers), and PyTorch prints that as "17179869184.00 GiB". No
// device holds 2^62 bytes (4 EiB).
const notAvailable = 1 << 62

// units are the units PyTorch prints (c10's format_size: bytes, KiB, MiB,
// GiB; the MPS allocator's own, in releases before it used c10's: bytes,
// KB, MB, GB, which divide by powers of 1024 all the same) and a few it
// does not but a hand-edited paste may carry; a unit's longer names come
// first so that "bytes" is not read as "b".
var units = []struct {
	name  string // lower case, as the normalised text has it
	shift uint
	print string
}{
	{"bytes", 0, "bytes"}, {"byte", 0, "bytes"},
	{"kib", 10, "KiB"}, {"mib", 20, "MiB"}, {"gib", 30, "GiB"}, {"tib", 40, "TiB"},
	{"kb", 10, "KB"}, {"mb", 20, "MB"}, {"gb", 30, "GB"},
	{"b", 0, "bytes"},
}

// parseSize reads a size at the start of t, normalised text (lower case, no
// white space): digits, an optional fraction, a unit. It returns the size,
// the bytes it used, and false when t does not start with one. A count too
// large to be real (NVML's "not available") comes back with na set.
func parseSize(t []byte) (s Size, n int, na, ok bool) {
	i := 0
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	if i == 0 || i > 19 {
		return Size{}, 0, false, false
	}
	intPart := string(t[:i])
	frac := ""
	if i+1 < len(t) && t[i] == '.' && isDigit(t[i+1]) {
		j := i + 1
		for j < len(t) && isDigit(t[j]) {
			j++
		}
		if j-i-1 > 6 {
			return Size{}, 0, false, false
		}
		frac = string(t[i+1 : j])
		i = j
	}
	for _, u := range units {
		if !hasPrefix(t[i:], u.name) {
			continue
		}
		mant, err := strconv.ParseUint(intPart+frac, 10, 64)
		if err != nil {
			return Size{}, 0, false, false
		}
		scale := pow10(len(frac))
		// bytes = round(mant << shift / scale), in 128 bits.
		hi, lo := bits.Mul64(mant, 1<<u.shift)
		if hi >= scale {
			na = true
		}
		var q, r uint64
		if !na {
			q, r = bits.Div64(hi, lo, scale)
			if r*2 >= scale && q < ^uint64(0) {
				q++
			}
			if q >= notAvailable {
				na = true
			}
		}
		tol := uint64(0)
		if u.shift > 0 {
			// Half a unit of the last printed digit.
			tol = (uint64(1) << u.shift) / (2 * scale)
		}
		printed := intPart
		if frac != "" {
			printed += "." + frac
		}
		printed += " " + u.print
		return Size{Bytes: q, Tolerance: tol, Printed: printed}, i + len(u.name), na, true
	}
	return Size{}, 0, false, false
}

// FormatSize prints n the way c10's format_size does: "N bytes" up to
// 1024, then KiB, MiB and GiB with two decimals. Figures bfcsim derives
// (sums, differences) are shown so, to read like the message's own.
func FormatSize(n uint64) string { return formatSize(n, false) }

// formatSize prints n as FormatSize does, or with kb set as the MPS
// allocator's own format_size did: KB, MB, GB, binary all the same.
func formatSize(n uint64, kb bool) string {
	names := [3]string{"KiB", "MiB", "GiB"}
	if kb {
		names = [3]string{"KB", "MB", "GB"}
	}
	switch {
	case n <= 1024:
		return fmt.Sprintf("%d bytes", n)
	case n <= 1<<20:
		return fmt.Sprintf("%.2f %s", float64(n)/(1<<10), names[0])
	case n <= 1<<30:
		return fmt.Sprintf("%.2f %s", float64(n)/(1<<20), names[1])
	default:
		return fmt.Sprintf("%.2f %s", float64(n)/(1<<30), names[2])
	}
}

// span is a count known to lie in [lo, hi], or unknown.
type span struct {
	lo, hi uint64
	known  bool
}

func spanOf(s *Size) span {
	if s == nil {
		return span{}
	}
	return span{lo: s.Min(), hi: s.Max(), known: true}
}

func (a span) add(b span) span {
	if !a.known || !b.known {
		return span{}
	}
	return span{lo: satAdd(a.lo, b.lo), hi: satAdd(a.hi, b.hi), known: true}
}

// sub is a − b, clamped at 0.
func (a span) sub(b span) span {
	if !a.known || !b.known {
		return span{}
	}
	return span{lo: satSub(a.lo, b.hi), hi: satSub(a.hi, b.lo), known: true}
}

// nominal is the middle of the span, for printing.
func (a span) nominal() uint64 { return a.lo + (a.hi-a.lo)/2 }

// tri is a three-valued truth: a test on figures that may be missing or
// within rounding of each other.
type tri int8

const (
	no tri = iota
	maybe
	yes
)

func (t tri) String() string { return [...]string{"no", "maybe", "yes"}[t] }

// geq is a ≥ b: yes when it holds for every count the figures stand for,
// no when it holds for none.
func geq(a, b span) tri {
	switch {
	case !a.known || !b.known:
		return maybe
	case a.lo >= b.hi:
		return yes
	case a.hi < b.lo:
		return no
	}
	return maybe
}

// gt is a > b.
func gt(a, b span) tri { return not(geq(b, a)) }

func not(t tri) tri { return 2 - t }

func and(ts ...tri) tri {
	r := yes
	for _, t := range ts {
		r = min(r, t)
	}
	return r
}

func or(ts ...tri) tri {
	r := no
	for _, t := range ts {
		r = max(r, t)
	}
	return r
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return ^uint64(0)
	}
	return s
}

func satSub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func hasPrefix(t []byte, s string) bool { return len(t) >= len(s) && string(t[:len(s)]) == s }
