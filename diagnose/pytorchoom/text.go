package pytorchoom

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/internal/sticky"
	"github.com/bfcsim/bfcsim/internal/textwrap"
)

// textWidth is the column WriteText wraps sentences at.
const textWidth = 78

// WriteText writes rep for a reader: a headline (the device and the
// request), where the message was read and in which release's words, the
// figures aligned with their tolerance and line, and the explanation with
// what it rests on, what the message leaves open, and advice. It fails
// only on a write error.
func WriteText(w io.Writer, rep *Report) error {
	ew := &sticky.Writer{W: w}
	src := rep.Source

	dev := src.Device
	if dev == "" {
		dev = "GPU"
	} else {
		dev += " GPU"
	}
	where := "a " + dev
	if rep.GPU != nil {
		where = fmt.Sprintf("%s %d", dev, *rep.GPU)
	}
	ew.Printf("PyTorch out of memory on %s: tried to allocate %s\n", where, rep.Request.Printed)
	lines := fmt.Sprintf("line %d", src.Line)
	if src.EndLine > src.Line {
		lines = fmt.Sprintf("lines %d–%d", src.Line, src.EndLine)
	}
	ew.Printf("read from %s, %s\n", src.Name, lines)
	if src.Format == FormatUnknown.String() {
		ew.Printf("in words that do not tell PyTorch's release\n")
	} else {
		ew.Printf("in the words of PyTorch %s: %s\n", src.PyTorchVersions, src.Shape)
	}
	if src.Exception != "" {
		ew.Printf("raised as %s\n", src.Exception)
	}
	if len(src.Variants) > 0 {
		for i, l := range textwrap.Lines("it shows "+strings.Join(src.Variants, "; "), textWidth) {
			if i > 0 {
				l = "  " + l
			}
			ew.Printf("%s\n", l)
		}
	}
	if src.Messages > 1 {
		at := make([]string, len(src.MessageLines))
		for i, n := range src.MessageLines {
			at[i] = strconv.Itoa(n)
		}
		more := ""
		if src.Messages > len(src.MessageLines) {
			more = ", …"
		}
		ew.Printf("the input holds %d out-of-memory messages (lines %s%s): this report is on the last\n",
			src.Messages, strings.Join(at, ", "), more)
	}
	if src.Truncated {
		ew.Printf("the paste stops after %s: %s not in it\n", src.Cut, strings.ReplaceAll(strings.Join(src.Missing, ", "), "_", " "))
	}
	for _, n := range src.Notes {
		for i, l := range textwrap.Lines("note: "+n, textWidth) {
			if i > 0 {
				l = "  " + l
			}
			ew.Printf("%s\n", l)
		}
	}

	ew.Printf("\n")
	row := func(label string, f *FigureReport, absent string) {
		if f == nil {
			ew.Printf("  %-22s %s\n", label, absent)
			return
		}
		tol := "exact"
		if f.Tolerance > 0 {
			tol = "±" + FormatSize(f.Tolerance)
		}
		from := fmt.Sprintf("line %d", f.Line)
		if f.Source == "derived" {
			from = f.From
		}
		ew.Printf("  %-22s %12s  %-12s %s\n", label, f.Printed, tol, from)
	}
	figs := rep.Figures
	row("request", figs["request"], "not in the paste")
	row("total capacity", figs["total_capacity"], "not in the paste")
	row("free", figs["free"], "not in the paste")
	if figs["allowed"] != nil || src.Format != FormatCached.String() {
		absent := "none printed"
		switch src.Format {
		case FormatCapacty.String(), FormatCapacity.String():
			absent = "none printed (this release may leave it out)"
		case FormatUnknown.String():
			absent = "not in the paste"
		}
		row("allowed (limit)", figs["allowed"], absent)
	}
	if rep.PyTorch.OtherProcesses != nil {
		row("this process in use", figs["process_in_use"], "not available from NVML")
		for _, p := range rep.PyTorch.OtherProcesses {
			label := fmt.Sprintf("process %d", p.PID)
			if p.Bytes == nil {
				ew.Printf("  %-22s %12s\n", label, "not available from NVML")
				continue
			}
			row(label, &FigureReport{Bytes: *p.Bytes, Printed: p.Printed, Tolerance: p.Tolerance, Source: "printed", Line: p.Line}, "")
		}
	} else if src.Format == FormatCapacty.String() || src.Format == FormatCapacity.String() {
		ew.Printf("  %-22s %s\n", "processes", "not listed (PyTorch lists them only where NVML is available)")
	}
	row("allocated by PyTorch", figs["allocated"], "not in the paste")
	if figs["private_pools"] != nil {
		row("  in private pools", figs["private_pools"], "")
	}
	row("reserved by PyTorch", figs["reserved"], "not in the paste")
	row("reserved, unallocated", figs["reserved_unallocated"], "not in the paste")

	e := rep.Explanation
	verdict := e.Verdict
	if !e.Confident {
		verdict += " (not confident)"
	}
	ew.Printf("\nexplanation: %s\n", verdict)
	for _, l := range textwrap.Lines(e.Reason, textWidth-2) {
		ew.Printf("  %s\n", l)
	}
	if len(e.Also) > 0 {
		ew.Printf("  also holds: %s\n", strings.Join(e.Also, ", "))
	}
	if len(e.RestsOn) > 0 {
		ew.Printf("  rests on:\n")
		for _, r := range e.RestsOn {
			ew.Printf("    %s\n", r)
		}
	}
	if len(e.CannotKnow) > 0 {
		ew.Printf("  cannot know from this message:\n")
		bullets(ew, e.CannotKnow, "    ")
	}
	if len(e.Advice) > 0 {
		ew.Printf("\nadvice\n")
		bullets(ew, e.Advice, "  ")
	}
	return ew.Err
}

func bullets(ew *sticky.Writer, items []string, indent string) {
	for _, it := range items {
		for i, l := range textwrap.Lines(it, textWidth-len(indent)-2) {
			lead := "- "
			if i > 0 {
				lead = "  "
			}
			ew.Printf("%s%s%s\n", indent, lead, l)
		}
	}
}
