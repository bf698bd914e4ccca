package trace

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStackTableRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteHeader(Header{Version: 1, Name: "s"}))
	require.NoError(t, w.WriteFrame(1, Frame{Name: "malloc", File: "CUDACachingAllocator.cpp"}))
	require.NoError(t, w.WriteFrame(2, Frame{Name: "forward", File: "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", Line: 134}))
	require.NoError(t, w.WriteFrame(3, Frame{Name: "train_step", File: "/home/me/train.py", Line: 57}))
	require.NoError(t, w.WriteStack(1, []uint32{1, 2, 3}))
	require.NoError(t, w.Write(Event{Op: OpAlloc, ID: 1, Size: 100, Tag: "train_step (train.py:57)", Stack: 1}))
	require.NoError(t, w.Write(Event{Op: OpAlloc, ID: 2, Size: 50, Tag: "other"}))
	require.NoError(t, w.Write(Event{Op: OpFree, ID: 1}))
	require.NoError(t, w.Flush())
	assert.Contains(t, buf.String(), `{"op":"stack","id":1,"frames":[1,2,3]}`)
	assert.Contains(t, buf.String(), `"tag":"train_step (train.py:57)","stack":1}`)

	r, err := NewReader(bytes.NewReader(buf.Bytes()), "s.jsonl", TrackCallSites())
	require.NoError(t, err)
	var got []Event
	for r.Next() {
		got = append(got, r.Event())
	}
	require.NoError(t, r.Err())
	require.Len(t, got, 3, "frame and stack lines are not events")
	assert.Equal(t, uint32(1), got[0].Stack)
	assert.Equal(t, uint32(0), got[1].Stack)
	assert.Equal(t, int64(3), r.Summary().Events)

	st := r.Stacks()
	require.Equal(t, 1, st.NumStacks())
	fr := st.Frames(1)
	require.Len(t, fr, 3)
	assert.Equal(t, Frame{Name: "train_step", File: "/home/me/train.py", Line: 57}, fr[2])
	assert.Equal(t, "train_step (train.py:57)", FrameRule{}.CallSite(fr))
	assert.Nil(t, st.Frames(2))

	sites := r.PeakCallSites()
	require.Len(t, sites, 2)
	assert.Equal(t, SiteBytes{Stack: 1, Tag: "train_step (train.py:57)", Bytes: 100, Count: 1}, sites[0])
	assert.Equal(t, SiteBytes{Tag: "other", Bytes: 50, Count: 1}, sites[1])
}

func TestStackTableErrors(t *testing.T) {
	for _, tc := range []struct{ name, trace, want string }{
		{"undefined stack", `{"op":"alloc","id":1,"size":4,"stack":1}`, "s.jsonl:1: alloc names stack 1, which is not defined"},
		{"frame out of order", `{"op":"frame","id":2,"name":"f"}`, "s.jsonl:1: frame id 2 out of order"},
		{"stack out of order", "{\"op\":\"frame\",\"id\":1}\n{\"op\":\"stack\",\"id\":3,\"frames\":[1]}", "s.jsonl:2: stack id 3 out of order"},
		{"undefined frame", `{"op":"stack","id":1,"frames":[1]}`, "s.jsonl:1: stack 1 names frame 1, which is not defined"},
		{"frames not an array", `{"op":"stack","id":1,"frames":"main"}`, "frames must be an array of frame ids, found string"},
		{"frame id zero", `{"op":"stack","id":1,"frames":[0]}`, "frame id 0 out of range"},
		{"stack without frames", `{"op":"stack","id":1}`, `stack without required field "frames"`},
		{"frame without id", `{"op":"frame","name":"f"}`, `frame without required field "id"`},
		{"bad line", `{"op":"frame","id":1,"line":"x"}`, "line must be an integer, found string"},
		{"stack too large", `{"op":"alloc","id":1,"size":4,"stack":4294967296}`, "stack 4294967296 is too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tc.trace+"\n"), "s.jsonl")
			require.NoError(t, err)
			for r.Next() {
			}
			require.Error(t, r.Err())
			assert.Contains(t, r.Err().Error(), tc.want)
		})
	}
}

func TestStackTableDepthBound(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"op":"frame","id":1}` + "\n" + `{"op":"stack","id":1,"frames":[1`)
	for range MaxStackDepth {
		b.WriteString(",1")
	}
	b.WriteString("]}\n")
	r, err := NewReader(strings.NewReader(b.String()), "deep.jsonl")
	require.NoError(t, err)
	for r.Next() {
	}
	require.ErrorContains(t, r.Err(), "a stack lists more than 4096 frames")
}

// TestPeakCallSitesMatchBruteForce checks the counter's bookkeeping against
// a copy of every site's bytes taken at each new peak.
func TestPeakCallSitesMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	w := NewWriter(&buf)
	type liveA struct {
		size uint64
		tag  string
	}
	live := map[uint64]liveA{}
	now := map[string]uint64{}
	var liveBytes, peak uint64
	var atPeak map[string]uint64
	nextID := uint64(1)
	for range 20000 {
		if len(live) == 0 || rng.IntN(100) < 52 {
			a := liveA{size: uint64(rng.IntN(1 << 16)), tag: []string{"a", "b", "c", "d", "e"}[rng.IntN(5)]}
			require.NoError(t, w.Write(Event{Op: OpAlloc, ID: nextID, Size: a.size, Tag: a.tag}))
			live[nextID] = a
			nextID++
			now[a.tag] += a.size
			liveBytes += a.size
			if liveBytes > peak {
				peak = liveBytes
				atPeak = map[string]uint64{}
				for k, v := range now {
					atPeak[k] = v
				}
			}
			continue
		}
		for id, a := range live {
			require.NoError(t, w.Write(Event{Op: OpFree, ID: id}))
			delete(live, id)
			now[a.tag] -= a.size
			liveBytes -= a.size
			break
		}
	}
	require.NoError(t, w.Flush())
	r, err := NewReader(&buf, "r.jsonl", TrackCallSites())
	require.NoError(t, err)
	for r.Next() {
	}
	require.NoError(t, r.Err())
	got := map[string]uint64{}
	var sum uint64
	for _, s := range r.PeakCallSites() {
		got[s.Tag] = s.Bytes
		sum += s.Bytes
	}
	assert.Equal(t, r.Summary().PeakLiveBytes, sum)
	assert.Equal(t, peak, sum)
	for k, v := range atPeak {
		if v > 0 {
			assert.Equal(t, v, got[k], "site %s", k)
		}
	}
}

func TestCallSiteRule(t *testing.T) {
	cpp := func(name string) Frame { return Frame{Name: name, File: "??"} }
	lib := Frame{Name: "forward", File: "/opt/venv/lib/python3.12/site-packages/transformers/pytorch_utils.py", Line: 119}
	user := Frame{Name: "run", File: "/home/user/project/train/torch_worker.py", Line: 44}
	stdlib := Frame{Name: "_run", File: "/usr/lib/python3.12/runpy.py", Line: 88}
	unwind := cpp("torch::unwind::unwind()")
	for _, tc := range []struct {
		name   string
		rule   FrameRule
		frames []Frame
		want   string
	}{
		{"user frame past C++ and libraries", FrameRule{}, []Frame{unwind, cpp("at::empty_strided"), lib, user, stdlib}, "run (torch_worker.py:44)"},
		{"library when no user frame", FrameRule{}, []Frame{unwind, lib, stdlib}, "forward (pytorch_utils.py:119)"},
		{"autograd node on the engine's thread", FrameRule{}, []Frame{unwind,
			cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)"),
			cpp("at::_ops::nll_loss_backward::call(at::Tensor const&)"),
			cpp("torch::autograd::generated::NllLossBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
			cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)")}, "NllLossBackward0 (autograd)"},
		{"aten op", FrameRule{}, []Frame{unwind, cpp("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)")}, "aten::mm"},
		{"past the recording machinery", FrameRule{}, []Frame{unwind, cpp("torch::CapturedTraceback::gather(bool, bool, bool)"), cpp("my_kernel_launch()")}, "my_kernel_launch()"},
		{"only machinery", FrameRule{}, []Frame{unwind}, "torch::unwind::unwind()"},
		{"--frames names the user's library", ParseFrameRule("transformers/"), []Frame{unwind, lib, user}, "forward (pytorch_utils.py:119)"},
		{"--frames: other scripts are not the user's", ParseFrameRule("/srv/mine/"), []Frame{unwind, user, stdlib}, "run (torch_worker.py:44)"},
		{"empty", FrameRule{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.rule.CallSite(tc.frames))
		})
	}
}

// A table written out and read back names the same frames for every stack.
func TestStackTableWriteTo(t *testing.T) {
	src := `{"bfcsim_trace":1}
{"op":"frame","id":1,"name":"forward","file":"/src/model.py","line":42}
{"op":"frame","id":2,"name":"step","file":"/src/train.py","line":7}
{"op":"stack","id":1,"frames":[1,2]}
{"op":"stack","id":2,"frames":[2]}
{"op":"alloc","id":1,"size":4096,"stack":2}
`
	r, err := NewReader(strings.NewReader(src), "t")
	require.NoError(t, err)
	for r.Next() {
	}
	require.NoError(t, r.Err())
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteHeader(Header{Version: 1}))
	require.NoError(t, r.Stacks().WriteTo(w))
	require.NoError(t, w.Write(Event{Op: OpAlloc, ID: 1, Size: 4096, Stack: 2}))
	require.NoError(t, w.Flush())
	back, err := NewReader(&buf, "back")
	require.NoError(t, err)
	for back.Next() {
	}
	require.NoError(t, back.Err())
	for id := uint32(1); id <= 2; id++ {
		assert.Equal(t, r.Stacks().Frames(id), back.Stacks().Frames(id))
	}
}
