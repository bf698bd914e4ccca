package trace

import (
	"encoding/binary"
	"fmt"
	"path"
	"strings"
)

// A recording's call stacks travel in the trace as a table, defined before
// the allocations that use it:
//
//	{"op":"frame","id":1,"name":"forward","file":"/src/model.py","line":42}
//	{"op":"stack","id":1,"frames":[3,2,1]}
//	{"op":"alloc","id":7,"size":4096,"tag":"forward (model.py:42)","stack":1}
//
// A frame is one function, file and line; a stack lists its frames
// innermost first. Frames and stacks are numbered 1, 2, 3, … in the order
// they are defined, each once, so that a stack shared by a million
// allocations is written once. The Reader keeps the table (StackTable)
// and hands on only the events; an alloc's Stack is the stack's id.

// Frame is one frame of a call stack.
type Frame struct {
	Name string // the function
	File string // the source file, as recorded; "" when unknown
	Line int64  // 0 when unknown
}

// String formats the frame as a tag: "forward (model.py:42)", with the
// file's base name only, and without what is unknown (line 0, file "??").
func (f Frame) String() string {
	file := path.Base(f.File)
	if f.File == "" || file == "." || file == "/" || file == "??" {
		return f.Name
	}
	where := file
	if f.Line > 0 {
		where = fmt.Sprintf("%s:%d", file, f.Line)
	}
	if f.Name == "" {
		return where
	}
	return f.Name + " (" + where + ")"
}

// Bounds of the stack table a Reader keeps: a recording of a whole training
// run has thousands of distinct stacks of some hundred frames; the bounds
// are far above that and keep a crafted trace from holding gigabytes.
// Definitions past them are counted (StackTable.Dropped) and ignored, and
// the allocations that name such a stack keep their tag only.
const (
	MaxStackFrames = 1 << 20 // frames defined
	MaxStacks      = 1 << 20 // stacks defined
	MaxStackRefs   = 1 << 24 // frames listed by all stacks together
	MaxStackDepth  = 4096    // frames one stack lists
)

// StackTable holds a trace's frames and stacks. The zero value is empty.
type StackTable struct {
	frames  []Frame
	starts  []uint32 // stack i's frames are refs[starts[i]:starts[i+1]]
	refs    []uint32 // frame indexes
	dropped int64
}

// NumStacks returns how many stacks the table holds; their ids are 1 to it.
func (t *StackTable) NumStacks() int {
	if t == nil || len(t.starts) == 0 {
		return 0
	}
	return len(t.starts) - 1
}

// NumFrames returns how many frames the table holds.
func (t *StackTable) NumFrames() int {
	if t == nil {
		return 0
	}
	return len(t.frames)
}

// Dropped returns how many definitions were ignored past the table's
// bounds.
func (t *StackTable) Dropped() int64 {
	if t == nil {
		return 0
	}
	return t.dropped
}

// Frames returns the frames of stack id, innermost first, or nil for an
// unknown id (0 among them). The slice is new.
func (t *StackTable) Frames(id uint32) []Frame {
	if id == 0 || int(id) > t.NumStacks() {
		return nil
	}
	refs := t.refs[t.starts[id-1]:t.starts[id]]
	out := make([]Frame, len(refs))
	for i, r := range refs {
		out[i] = t.frames[r]
	}
	return out
}

// addFrame defines the next frame; it returns the reason it cannot.
func (t *StackTable) addFrame(id uint64, f Frame) string {
	if want := uint64(len(t.frames)) + 1; id != want {
		if t.dropped > 0 && id > want {
			t.dropped++
			return ""
		}
		return fmt.Sprintf("frame id %d out of order: frames are numbered 1, 2, 3, … as they are defined, and the next is %d", id, want)
	}
	if len(t.frames) >= MaxStackFrames {
		t.dropped++
		return ""
	}
	t.frames = append(t.frames, f)
	return ""
}

// addStack defines the next stack, its frames given as 4-byte
// little-endian frame ids (decodeFrameIDs); it returns the reason it
// cannot.
func (t *StackTable) addStack(id uint64, ids string) string {
	if len(t.starts) == 0 {
		t.starts = append(t.starts, 0)
	}
	if want := uint64(len(t.starts)); id != want {
		if t.dropped > 0 && id > want {
			t.dropped++
			return ""
		}
		return fmt.Sprintf("stack id %d out of order: stacks are numbered 1, 2, 3, … as they are defined, and the next is %d", id, want)
	}
	n := len(ids) / 4
	for i := range n {
		f := binary.LittleEndian.Uint32([]byte(ids[4*i : 4*i+4]))
		if f == 0 || int(f) > len(t.frames) {
			if t.dropped > 0 {
				t.dropped++
				return "" // it may name a frame dropped past the bounds
			}
			return fmt.Sprintf("stack %d names frame %d, which is not defined", id, f)
		}
	}
	if len(t.starts) > MaxStacks || len(t.refs)+n > MaxStackRefs {
		t.dropped++
		return ""
	}
	for i := range n {
		t.refs = append(t.refs, binary.LittleEndian.Uint32([]byte(ids[4*i:4*i+4]))-1)
	}
	t.starts = append(t.starts, uint32(len(t.refs)))
	return ""
}

// FrameRule says which frames of a stack are the program's own, to name the
// call site of an allocation (CallSite). The zero rule is the default.
type FrameRule struct {
	// Mine are path fragments: a frame whose file contains one of them is
	// the program's own, whatever else it is. Empty: the default rule.
	Mine []string
}

// ParseFrameRule reads --frames: path fragments separated by commas.
func ParseFrameRule(s string) FrameRule {
	var r FrameRule
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			r.Mine = append(r.Mine, p)
		}
	}
	return r
}

// FrameKind classifies a frame for CallSite.
type FrameKind uint8

// The kinds of frame, from the program's own to the machinery that
// recorded the stack.
const (
	FrameUser    FrameKind = iota // the program's own source
	FrameLibrary                  // an installed library, the standard library, the framework
	FrameNative                   // C, C++ and the interpreter
)

// Kind classifies f under the rule. Without path fragments, a frame is the
// program's own when it comes from a Python source file outside the
// interpreter's library, site-packages and dist-packages, and outside the
// frameworks' own packages (torch, jax, tensorflow and their kin); native
// frames (C, C++, the interpreter itself, "??") are never its own. With
// fragments, a frame whose file holds one is its own, and every other frame
// is a library's or native.
func (r FrameRule) Kind(f Frame) FrameKind {
	file := f.File
	for _, m := range r.Mine {
		if strings.Contains(file, m) {
			return FrameUser
		}
	}
	if !isScriptFile(file) {
		return FrameNative
	}
	if len(r.Mine) > 0 || isLibraryPath(file) {
		return FrameLibrary
	}
	return FrameUser
}

// isScriptFile says whether file is an interpreted source file: a frame of
// the program's own language rather than of the native code under it.
func isScriptFile(file string) bool {
	return strings.HasSuffix(file, ".py") || strings.HasSuffix(file, ".pyx")
}

// libraryDirs are the path pieces that say a Python file is not the
// program's own: installed packages, and the frameworks' own trees when
// they run from a source checkout.
var libraryDirs = []string{
	"/site-packages/", "/dist-packages/", "/lib/python", "<frozen ", "<string>",
	"/torch/", "/jax/", "/jaxlib/", "/tensorflow/", "/keras/", "/transformers/",
}

func isLibraryPath(file string) bool {
	if strings.HasPrefix(file, "<") {
		return true // <frozen runpy>, <string>, <stdin>: the interpreter's own
	}
	for _, d := range libraryDirs {
		if strings.Contains(file, d) {
			return true
		}
	}
	return false
}

// CallSite names the call site of a stack (innermost frame first): the
// innermost frame of the program's own code. When no frame is its own, the
// innermost library frame of the program's language stands in, and when
// there is none of those either (a C++-only stack, such as an allocation
// the autograd engine makes on its own thread), the operation the native
// frames name (nativeSite). It returns "" for an empty stack.
func (r FrameRule) CallSite(frames []Frame) string {
	lib := -1
	for i, f := range frames {
		switch r.Kind(f) {
		case FrameUser:
			return f.String()
		case FrameLibrary:
			if lib < 0 {
				lib = i
			}
		}
	}
	if lib >= 0 {
		return frames[lib].String()
	}
	return nativeSite(frames)
}

// nativeSite names a stack of native frames only: the autograd node that
// ran (its apply), else the ATen operator called, else the innermost frame
// that is not the stack unwinder or the caching allocator recording it.
func nativeSite(frames []Frame) string {
	for _, f := range frames {
		if n, ok := autogradNode(f.Name); ok {
			return n + " (autograd)"
		}
	}
	for _, f := range frames {
		if n, ok := atenOp(f.Name); ok {
			return "aten::" + n
		}
	}
	for _, f := range frames {
		if !isRecordingMachinery(f.Name) {
			return f.String()
		}
	}
	if len(frames) > 0 {
		return frames[0].String()
	}
	return ""
}

// autogradNode reads "torch::autograd::generated::MmBackward0::apply(…)"
// (or any autograd Node's apply) as "MmBackward0".
func autogradNode(name string) (string, bool) {
	if !strings.HasPrefix(name, "torch::autograd::") {
		return "", false
	}
	head, _, ok := strings.Cut(name, "::apply(")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(head, "::")
	node := head[i+2:]
	if node == "" || node == "Node" || strings.ContainsAny(node, "()<> ") {
		return "", false
	}
	return node, true
}

// atenOp reads "at::_ops::mm::call(…)" as "mm"; the empty tensors every
// operator allocates through are passed over.
func atenOp(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "at::_ops::")
	if !ok {
		return "", false
	}
	op, _, ok := strings.Cut(rest, "::call(")
	if !ok || op == "" || strings.ContainsAny(op, "()<>: ") || strings.HasPrefix(op, "empty") || strings.HasPrefix(op, "new_empty") {
		return "", false // the allocation itself: the operator that asked for it is further out
	}
	return op, true
}

// recordingMachinery are the native frames every recorded stack starts
// with: the unwinder that took it and the caching allocator asking.
var recordingMachinery = []string{
	"torch::unwind::", "torch::CapturedTraceback::", "torch::cuda::(anonymous namespace)::gather",
	"c10::cuda::CUDACachingAllocator::", "c10::", "at::detail::empty", "at::empty",
}

func isRecordingMachinery(name string) bool {
	for _, m := range recordingMachinery {
		if strings.HasPrefix(name, m) {
			return true
		}
	}
	return false
}

// encodeFrameIDs appends frame ids as a stack definition carries them from
// the decoder to the Reader: 4 bytes each, little-endian.
func encodeFrameIDs(dst []byte, id uint32) []byte {
	return binary.LittleEndian.AppendUint32(dst, id)
}

// WriteTo writes the table to w, frames then stacks, with the ids they
// have here, so that the allocations written after it keep their Stack.
func (t *StackTable) WriteTo(w *Writer) error {
	if t == nil {
		return nil
	}
	for i, f := range t.frames {
		if err := w.WriteFrame(uint32(i+1), f); err != nil {
			return err
		}
	}
	ids := make([]uint32, 0, 64)
	for s := 1; s <= t.NumStacks(); s++ {
		ids = ids[:0]
		for _, r := range t.refs[t.starts[s-1]:t.starts[s]] {
			ids = append(ids, r+1)
		}
		if err := w.WriteStack(uint32(s), ids); err != nil {
			return err
		}
	}
	return nil
}
