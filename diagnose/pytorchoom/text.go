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

	format := formatNamed(src.Format)
	dev := src.Device
	switch {
	case format.IsMPS() || dev == "MPS":
		dev = "an MPS device (Apple GPU)"
	case dev == "":
		dev = "GPU"
	default:
		dev += " GPU"
	}
	where := dev
	switch {
	case strings.HasPrefix(dev, "an "):
	case rep.GPU != nil:
		where = fmt.Sprintf("%s %d", dev, *rep.GPU)
	default:
		where = "a " + dev
	}
	request := "the request is not in the paste"
	if rep.Request != nil {
		request = "tried to allocate " + rep.Request.Printed
	}
	ew.Printf("PyTorch out of memory on %s: %s\n", where, request)
	lines := fmt.Sprintf("line %d", src.Line)
	if src.EndLine > src.Line {
		lines = fmt.Sprintf("lines %d–%d", src.Line, src.EndLine)
	}
	ew.Printf("read from %s, %s\n", src.Name, lines)
	if src.Format == FormatUnknown.String() {
		ew.Printf("in words that do not tell PyTorch's release\n")
	} else if format == FormatIPEX {
		ew.Printf("in the words of %s: %s\n", src.PyTorchVersions, src.Shape)
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
	if format.IsMPS() {
		writeMPSFigures(row, figs, format)
	} else {
		writeFigures(ew, row, rep, format)
	}

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

// figureRow writes one figure's row, or absent when it is nil.
type figureRow func(label string, f *FigureReport, absent string)

// writeFigures writes the figures of the CUDA allocator's wordings (and
// those of its kin: HIP, XPU, IPEX).
func writeFigures(ew *sticky.Writer, row figureRow, rep *Report, format Format) {
	figs, src := rep.Figures, rep.Source
	row("request", figs["request"], "not in the paste")
	row("total capacity", figs["total_capacity"], "not in the paste")
	if format.printsFree() || figs["free"] != nil {
		row("free", figs["free"], "not in the paste")
	} else {
		row("free", nil, "not printed by this allocator")
	}
	if figs["allowed"] != nil || (format != FormatCached && format != FormatIPEX && format != FormatXPU) {
		absent := "none printed"
		switch format {
		case FormatCapacty, FormatCapacity:
			absent = "none printed (this release may leave it out)"
		case FormatUnknown:
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
	} else if (format == FormatCapacty || format == FormatCapacity) && src.Device != "XPU" {
		ew.Printf("  %-22s %s\n", "processes", "not listed (PyTorch lists them only where NVML is available)")
	}
	row("allocated by PyTorch", figs["allocated"], "not in the paste")
	if figs["private_pools"] != nil {
		row("  in private pools", figs["private_pools"], "")
	}
	row("reserved by PyTorch", figs["reserved"], "not in the paste")
	row("reserved, unallocated", figs["reserved_unallocated"], "not in the paste")
}

// writeMPSFigures writes the MPS allocator's figures in its own terms.
func writeMPSFigures(row figureRow, figs map[string]*FigureReport, format Format) {
	row("request", figs["request"], "not in the paste")
	if format == FormatMPS {
		row("MPS allocated", figs["reserved"], "not in the paste")
		row("other allocations", figs["other_allocations"], "not in the paste")
	}
	row("driver allocated", figs["driver_allocated"], "not in the paste")
	row("max allowed (limit)", figs["allowed"], "none (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0)")
}

// formatNamed is the format of the name Format.String gives.
func formatNamed(name string) Format {
	for f := FormatCached; f <= FormatMPSEarly; f++ {
		if f.String() == name {
			return f
		}
	}
	return FormatUnknown
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
