package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// CNNInfer models inference of a ResNet-like convolutional network (basic
// blocks of two 3×3 convolutions, batch norm folded into the convolutions'
// biases, as inference engines do) in fp16:
//
//  1. At the start, the weights and biases, never freed, then a step named
//     "load" that ends the loading phase.
//  2. Each run: the input batch; the stem (7×7 convolution, stride 2, and a
//     stride-2 max pool); Stages stages of BlocksPerStage blocks, the first
//     block of every stage after the first halving the resolution and
//     doubling the channels through a 1×1 downsampling shortcut; global
//     average pooling, the classifier and its softmax.
//  3. Every convolution allocates an im2col-style workspace, its output, and
//     frees the workspace right away; an activation is freed as soon as its
//     consumer has run, except a block's input, which the residual connection
//     keeps alive until the (in-place) add.
//  4. Everything but the weights is freed by the end of the run, then a step
//     event, named by the run's 0-based index, ends it.
//
// Every run has the same lifetimes, only scaled by its batch size
// (BatchJitter), and frees everything it allocated. An arena that keeps the
// weights apart (arena.split=first-step) therefore resets after every run
// and stops calling the device once one chunk holds a run; a single arena
// cannot, because the weights pin it. A bump arena still needs every byte a
// run allocates (about 270 MiB at the defaults), not just the run's peak
// (about 42 MiB): packing a run into its peak is an offline planner's job.
type CNNInfer struct {
	// Seed drives the batch sizes (see BatchJitter).
	Seed uint64 `help:"seed for the per-run batch sizes"`
	// Runs is the number of inference runs (forward passes).
	Runs int `help:"inference runs, separated by step events"`
	// Batch is the largest number of images in a run.
	Batch int `help:"largest batch"`
	// BatchJitter is the fraction by which the batch size varies: each run's
	// batch is uniform in [(1−BatchJitter)·Batch, Batch]. 0 for a fixed batch.
	BatchJitter float64 `help:"fraction by which each run's batch varies"`
	// ImageSize is the input's height and width, in pixels.
	ImageSize int `help:"input height and width (pixels)"`
	// BaseChannels is the number of channels of the stem and the first
	// stage; each later stage doubles it.
	BaseChannels int `help:"channels of the first stage"`
	// Stages is the number of resolution stages.
	Stages int `help:"resolution stages"`
	// BlocksPerStage is the number of residual blocks in a stage.
	BlocksPerStage int `help:"residual blocks per stage"`
	// Classes is the number of output classes.
	Classes int `help:"classifier outputs"`
	// MaxWorkspaceBytes caps a convolution's workspace, in bytes, like the
	// workspace limit frameworks give cuDNN's algorithm search.
	MaxWorkspaceBytes int64 `help:"largest convolution workspace (bytes)"`
}

// DefaultCNNInfer returns a ResNet-18-shaped network (64 base channels, 4
// stages of 2 blocks, 224×224 images, 1000 classes) run 32 times on batches
// of 4 to 8 images: about 3,000 events, under 0.2 MB of JSONL.
func DefaultCNNInfer() CNNInfer {
	return CNNInfer{
		Seed:              1,
		Runs:              32,
		Batch:             8,
		BatchJitter:       0.5,
		ImageSize:         224,
		BaseChannels:      64,
		Stages:            4,
		BlocksPerStage:    2,
		Classes:           1000,
		MaxWorkspaceBytes: 32 << 20,
	}
}

var _ Generator = CNNInfer{}

// Header implements Generator.
func (c CNNInfer) Header() trace.Header {
	name := fmt.Sprintf("cnn-infer runs=%d batch=%d image-size=%d base-channels=%d stages=%d blocks-per-stage=%d seed=%d",
		c.Runs, c.Batch, c.ImageSize, c.BaseChannels, c.Stages, c.BlocksPerStage, c.Seed)
	return header("cnn-infer", name, c)
}

// Validate reports the first invalid field, if any.
func (c CNNInfer) Validate() error {
	ck := checker{workload: "cnn-infer"}
	ck.atLeast("Runs", int64(c.Runs), 0)
	ck.atLeast("Batch", int64(c.Batch), 1)
	ck.fraction("BatchJitter", c.BatchJitter)
	ck.atLeast("ImageSize", int64(c.ImageSize), 1)
	ck.atLeast("BaseChannels", int64(c.BaseChannels), 1)
	ck.atLeast("Stages", int64(c.Stages), 1)
	ck.atLeast("BlocksPerStage", int64(c.BlocksPerStage), 1)
	ck.atLeast("Classes", int64(c.Classes), 1)
	ck.atLeast("MaxWorkspaceBytes", c.MaxWorkspaceBytes, 0)
	ck.atMost("BlocksPerStage", int64(c.BlocksPerStage), 10_000)
	if ck.err == nil && c.Stages > 24 {
		ck.fail("stages must be at most 24, got %d", c.Stages)
	}
	if ck.err == nil {
		top := int64(c.BaseChannels) << (c.Stages - 1)
		s := int64(c.ImageSize)
		ck.bytes("the stem's output", int64(c.Batch), int64(c.BaseChannels), s, s, fp16Bytes)
		ck.bytes("the last stage's weights", top, top, 9, fp16Bytes)
		ck.bytes("the classifier", int64(c.Classes), top, fp32Bytes)
	}
	return ck.err
}

// conv is one convolution of the network.
type conv struct {
	name            string // e.g. "stage1.block0.conv1"
	in, out, kernel int64  // channels in and out, kernel width
	stride          int64
}

func (c conv) weightElems() int64 { return c.out * c.in * c.kernel * c.kernel }

// block is one residual block: two 3×3 convolutions and, when it changes
// the shape, a 1×1 downsampling shortcut.
type block struct {
	conv1, conv2 conv
	down         *conv
}

// cnnGen is the state of one CNNInfer.Generate.
type cnnGen struct {
	c      CNNInfer
	e      *emitter
	rng    *rand.Rand
	stem   conv
	blocks []block
	top    int64 // channels of the last stage
	b      int64 // this run's batch
}

// Generate implements Generator.
func (c CNNInfer) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	g := &cnnGen{c: c, e: newEmitter(emit, hbmBytesPerUS), rng: newRand(c.Seed)}
	g.plan()
	g.run()
	return g.e.err
}

// plan lays out the network's convolutions.
func (g *cnnGen) plan() {
	ch := int64(g.c.BaseChannels)
	g.stem = conv{name: "stem.conv", in: 3, out: ch, kernel: 7, stride: 2}
	in := ch
	for s := range g.c.Stages {
		out := int64(g.c.BaseChannels) << s
		for j := range g.c.BlocksPerStage {
			n := "stage" + strconv.Itoa(s) + ".block" + strconv.Itoa(j) + "."
			stride := int64(1)
			if j == 0 && s > 0 {
				stride = 2
			}
			bl := block{
				conv1: conv{name: n + "conv1", in: in, out: out, kernel: 3, stride: stride},
				conv2: conv{name: n + "conv2", in: out, out: out, kernel: 3, stride: 1},
			}
			if stride != 1 || in != out {
				bl.down = &conv{name: n + "downsample", in: in, out: out, kernel: 1, stride: stride}
			}
			g.blocks = append(g.blocks, bl)
			in = out
		}
	}
	g.top = in
}

func (g *cnnGen) run() {
	e := g.e
	weight := func(c conv) {
		e.alloc(c.weightElems()*fp16Bytes, c.name+".weight")
		e.alloc(c.out*fp16Bytes, c.name+".bias")
	}
	weight(g.stem)
	for _, bl := range g.blocks {
		weight(bl.conv1)
		weight(bl.conv2)
		if bl.down != nil {
			weight(*bl.down)
		}
	}
	classes := int64(g.c.Classes)
	e.alloc(classes*g.top*fp16Bytes, "fc.weight")
	e.alloc(classes*fp16Bytes, "fc.bias")
	e.step(loadStep)

	for r := 0; r < g.c.Runs && e.err == nil; r++ {
		g.b = int64(jittered(g.rng, g.c.Batch, g.c.BatchJitter, 1))
		size := int64(g.c.ImageSize)
		input := e.alloc(g.b*3*size*size*fp16Bytes, "input")
		x, size := g.conv(g.stem, size)
		e.free(input)
		size = ceilDiv(size, 2)
		pool := e.alloc(g.b*g.stem.out*size*size*fp16Bytes, "stem.maxpool")
		e.free(x)
		x = pool
		for _, bl := range g.blocks {
			y1, out := g.conv(bl.conv1, size)
			y2, _ := g.conv(bl.conv2, out)
			e.free(y1)
			if bl.down != nil {
				shortcut, _ := g.conv(*bl.down, size)
				e.free(x)
				e.free(shortcut) // after y2 += shortcut, in place
			} else {
				e.free(x) // after y2 += x, in place
			}
			x, size = y2, out
		}
		avg := e.alloc(g.b*g.top*fp16Bytes, "head.avgpool")
		e.free(x)
		logits := e.alloc(g.b*classes*fp16Bytes, "head.fc")
		e.free(avg)
		probs := e.alloc(g.b*classes*fp32Bytes, "head.softmax")
		e.free(logits)
		e.free(probs) // copied to the host
		e.step(strconv.Itoa(r))
	}
}

// conv runs c on an input of size×size pixels: workspace, output, free the
// workspace. It returns the output and its size.
func (g *cnnGen) conv(c conv, size int64) (uint64, int64) {
	out := ceilDiv(size, c.stride)
	ws := min(g.b*c.in*c.kernel*c.kernel*out*out*fp16Bytes, g.c.MaxWorkspaceBytes)
	var wsID uint64
	if ws > 0 {
		wsID = g.e.alloc(ws, c.name+".workspace")
	}
	y := g.e.alloc(g.b*c.out*out*out*fp16Bytes, c.name+".out")
	if wsID != 0 {
		g.e.free(wsID)
	}
	return y, out
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
