package pytorchoom

// ReportVersion is the version of Report's JSON layout, its first key.
const ReportVersion = 1

// Report is what `bfcsim inspect` shows of a PyTorch out-of-memory message:
// built once (NewReport), written as JSON (encoding/json) or as text
// (WriteText). Keys are stable; figures a message does not print are null.
type Report struct {
	Version int `json:"bfcsim_pytorch_oom"`
	// Format names the message's shape by the first release that printed
	// it: "pytorch-1.0", "pytorch-1.4", "pytorch-2.1", "pytorch-2.2"; or
	// by its allocator: "pytorch-xpu", "ipex", "pytorch-mps",
	// "pytorch-mps-1.12".
	Format string       `json:"format"`
	Source SourceReport `json:"source"`
	// Request is the failed request; null when the paste does not have it.
	Request *RequestReport `json:"request"`
	// GPU is the device index the message names; null when not printed.
	GPU     *int           `json:"gpu"`
	PyTorch PyTorchFigures `json:"pytorch"`
	// Figures says where each figure comes from, by the keys of PyTorch
	// and "request"; null for a figure the message does not have.
	Figures     map[string]*FigureReport `json:"figures"`
	Explanation ExplanationReport        `json:"explanation"`
}

// SourceReport describes the input and the message read from it.
type SourceReport struct {
	Name string `json:"name"`
	// Format, PyTorchVersions and Shape name the message's shape and the
	// releases that print it (narrowed by what the message shows).
	Format          string `json:"format"`
	PyTorchVersions string `json:"pytorch_versions"`
	Shape           string `json:"shape"`
	// Exception and Device are as printed ("MPS" for the MPS allocator's
	// message); empty when the paste does not show them.
	Exception string `json:"exception"`
	Device    string `json:"device"`
	// Pool is the MPS pool the request was for, "private" or "shared";
	// empty for other devices.
	Pool string `json:"pool"`
	// Line and EndLine are where the message is in the input; Lines is
	// how many lines the input has.
	Line    int `json:"line"`
	EndLine int `json:"end_line"`
	Lines   int `json:"lines"`
	// Messages counts the messages in the input; the report is on the
	// last. MessageLines are the first lines of (the first 20 of) them.
	Messages     int   `json:"messages"`
	MessageLines []int `json:"message_lines"`
	// Truncated is set when the paste stops before the message does; Cut
	// says after what, Missing which figures it leaves out. StartsAt names
	// where a paste that leaves out the message's start begins (the
	// device and the request are then not in it); empty otherwise.
	Truncated bool     `json:"truncated"`
	Cut       string   `json:"cut"`
	StartsAt  string   `json:"starts_at"`
	Missing   []string `json:"missing"`
	// Variants lists what the message shows beyond its shape's core.
	Variants []string `json:"variants"`
	Notes    []string `json:"notes"`
	// Advice and AllocConfVar are the setting and the environment variable
	// PyTorch's own advice names; empty when it gives none.
	Advice       string `json:"advice"`
	AllocConfVar string `json:"alloc_conf_var"`
	// Text is the message as read, white space collapsed.
	Text string `json:"text"`
}

// RequestReport is the failed request.
type RequestReport struct {
	Bytes     uint64 `json:"bytes"`
	Printed   string `json:"printed"`
	Tolerance uint64 `json:"tolerance"`
}

// PyTorchFigures are the message's figures in bytes, null where it does not
// say.
type PyTorchFigures struct {
	TotalCapacity *uint64 `json:"total_capacity"`
	Free          *uint64 `json:"free"`
	Allocated     *uint64 `json:"allocated"`
	// Reserved is PyTorch's reserved total: printed from 1.4 to 2.0,
	// allocated + reserved_unallocated otherwise.
	Reserved *uint64 `json:"reserved"`
	// ReservedUnallocated is printed as "cached" (1.0–1.3) and from 2.1,
	// reserved − allocated from 1.4 to 2.0.
	ReservedUnallocated *uint64 `json:"reserved_unallocated"`
	// Allowed is the per-process limit, when printed.
	Allowed *uint64 `json:"allowed"`
	// OtherProcesses is NVML's list of the other processes on the device;
	// null when the message has no such list, [] when it lists only this
	// process.
	OtherProcesses []ProcessReport `json:"other_processes"`
	// ProcessInUse is this process's memory as NVML sees it.
	ProcessInUse *uint64 `json:"process_in_use"`
	// PrivatePools is the part of allocated in private pools (CUDA graphs).
	PrivatePools *uint64 `json:"private_pools"`
	// OtherAllocations (MPS) is what the process holds from Metal outside
	// PyTorch's heaps. For MPS, Reserved is "MPS allocated" (PyTorch's
	// heaps) and Allowed is "max allowed" (the high-watermark limit).
	OtherAllocations *uint64 `json:"other_allocations"`
	// DriverAllocated (MPS) is all the process holds from Metal: "MPS
	// allocated" + "other allocations" (printed as "currently allocated"
	// by the first MPS allocator); the limit is tested against it.
	DriverAllocated *uint64 `json:"driver_allocated"`
}

// ProcessReport is another process on the device. Bytes is null where NVML
// could not report it.
type ProcessReport struct {
	PID       int64   `json:"pid"`
	Bytes     *uint64 `json:"bytes"`
	Printed   string  `json:"printed"`
	Tolerance uint64  `json:"tolerance"`
	From      string  `json:"from"`
	Line      int     `json:"line"`
}

// FigureReport says where a figure comes from.
type FigureReport struct {
	Bytes uint64 `json:"bytes"`
	// Printed is the figure as PyTorch printed it (derived ones in the same
	// style); the true count lies within Bytes ± Tolerance.
	Printed   string `json:"printed"`
	Tolerance uint64 `json:"tolerance"`
	// Source is "printed" or "derived".
	Source string `json:"source"`
	// From is the clause it was read from, or how it was derived; Line is
	// the input line (0 for a derived figure).
	From string `json:"from"`
	Line int    `json:"line"`
}

// ExplanationReport is Explanation for JSON.
type ExplanationReport struct {
	// Verdict is no-room, other-process, limit or fragmentation.
	Verdict    string   `json:"verdict"`
	Confident  bool     `json:"confident"`
	Reason     string   `json:"reason"`
	RestsOn    []string `json:"rests_on"`
	CannotKnow []string `json:"cannot_know"`
	Also       []string `json:"also"`
	Advice     []string `json:"advice"`
}

// NewReport builds the report on in's last message.
func NewReport(in *Input) *Report {
	m := in.Last
	rep := &Report{
		Version: ReportVersion,
		Format:  m.Format.String(),
		Source: SourceReport{
			Name:            in.Name,
			Format:          m.Format.String(),
			PyTorchVersions: m.versions(),
			Shape:           m.Format.Shape(),
			Exception:       m.Exception,
			Device:          m.Device,
			Pool:            m.Pool,
			Line:            m.Line,
			EndLine:         m.EndLine,
			Lines:           in.Lines,
			Messages:        in.Count,
			MessageLines:    nonNil(in.MessageLines),
			Truncated:       m.Truncated,
			Cut:             m.Cut,
			StartsAt:        m.StartsAt,
			Missing:         nonNil(m.Missing()),
			Variants:        nonNil(m.variants()),
			Notes:           nonNil(m.Notes),
			Advice:          m.Advice,
			AllocConfVar:    m.ConfVar,
			Text:            m.Text,
		},
		Figures: map[string]*FigureReport{},
	}
	if m.Request != nil {
		rep.Request = &RequestReport{Bytes: m.Request.Bytes, Printed: m.Request.Printed, Tolerance: m.Request.Tolerance}
	}
	if m.GPU >= 0 {
		g := m.GPU
		rep.GPU = &g
	}
	bytesOf := func(f *Figure) *uint64 {
		if f == nil {
			return nil
		}
		b := f.Bytes
		return &b
	}
	rep.PyTorch = PyTorchFigures{
		TotalCapacity:       bytesOf(m.TotalCapacity),
		Free:                bytesOf(m.Free),
		Allocated:           bytesOf(m.Allocated),
		Reserved:            bytesOf(m.Reserved),
		ReservedUnallocated: bytesOf(m.ReservedUnallocated),
		Allowed:             bytesOf(m.Allowed),
		ProcessInUse:        bytesOf(m.ProcessInUse),
		PrivatePools:        bytesOf(m.PrivatePools),
		OtherAllocations:    bytesOf(m.OtherAllocations),
		DriverAllocated:     bytesOf(m.DriverAllocated),
	}
	if m.SelfListed || m.Others != nil {
		rep.PyTorch.OtherProcesses = []ProcessReport{}
		for _, p := range m.Others {
			pr := ProcessReport{PID: p.PID, Bytes: bytesOf(p.InUse)}
			if p.InUse != nil {
				pr.Printed, pr.Tolerance, pr.From, pr.Line = p.InUse.Printed, p.InUse.Tolerance, p.InUse.From, p.InUse.Line
			}
			rep.PyTorch.OtherProcesses = append(rep.PyTorch.OtherProcesses, pr)
		}
	}
	for _, nf := range m.figures() {
		rep.Figures[nf.key] = figureReport(nf.f)
	}
	e := Explain(m)
	rep.Explanation = ExplanationReport{
		Verdict:    string(e.Verdict),
		Confident:  e.Confident,
		Reason:     e.Reason,
		RestsOn:    nonNil(e.RestsOn),
		CannotKnow: nonNil(e.CannotKnow),
		Also:       []string{},
		Advice:     nonNil(e.Advice),
	}
	for _, v := range e.Also {
		rep.Explanation.Also = append(rep.Explanation.Also, string(v))
	}
	return rep
}

func figureReport(f *Figure) *FigureReport {
	if f == nil {
		return nil
	}
	r := &FigureReport{Bytes: f.Bytes, Printed: f.Printed, Tolerance: f.Tolerance, Source: "printed", From: f.From, Line: f.Line}
	if f.Derived != "" {
		r.Source, r.From, r.Line = "derived", f.Derived, 0
	}
	return r
}

// nonNil makes a nil slice empty, so that JSON shows [] and not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
