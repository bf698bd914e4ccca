package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// TransformerTrain models mixed-precision training of a GPT-2-style
// decoder, the way a PyTorch training loop with fp16 weights, fp32 master
// weights and Adam allocates:
//
//  1. At the start, the fp16 weights, never freed, then a step named "load"
//     that ends the loading phase.
//  2. Each step: the batch (token ids and targets, int64); the forward pass,
//     which keeps the activations autograd saves for backward and frees
//     short-lived temporaries (attention scores, GEMM workspaces, pre-dropout
//     outputs) right away; the loss.
//  3. The backward pass walks the layers in reverse: it allocates gradients
//     of activations, frees each once consumed, allocates each weight's fp16
//     gradient when its op is reached, and frees the saved activations in
//     exactly the reverse order of their allocation.
//  4. The optimizer step: on the first step, Adam's state (exp_avg and
//     exp_avg_sq, fp32) and the fp32 master weights are allocated lazily,
//     parameter by parameter, and kept; every step upcasts each gradient in a
//     temporary; then the gradients are freed (zero_grad(set_to_none=True)).
//  5. The batch and the loss are freed and a step event, named by the step's
//     0-based index, ends the step.
//
// Each step's sequence length varies with SeqJitter: dynamic shapes are what
// fragments real caching allocators.
type TransformerTrain struct {
	// Seed drives the per-step sequence lengths (see SeqJitter).
	Seed uint64 `help:"seed for the per-step sequence lengths"`
	// Layers is the number of transformer blocks.
	Layers int `help:"transformer blocks"`
	// Hidden is the model width, in elements (d_model).
	Hidden int `help:"model width d_model (elements)"`
	// Heads is the number of attention heads; it must divide Hidden.
	Heads int `help:"attention heads (must divide hidden)"`
	// SeqLen is the longest sequence, in tokens; the position embedding has
	// SeqLen rows.
	SeqLen int `help:"longest sequence (tokens)"`
	// Batch is the number of sequences per step.
	Batch int `help:"sequences per step"`
	// Steps is the number of training steps.
	Steps int `help:"training steps"`
	// Vocab is the vocabulary size, in tokens; the embedding and the logits
	// grow with it.
	Vocab int `help:"vocabulary size (tokens)"`
	// SeqJitter is the fraction by which each step's sequence length varies:
	// it is uniform in [(1−SeqJitter)·SeqLen, SeqLen], rounded down to a
	// multiple of 8. 0 gives every step the same shapes.
	SeqJitter float64 `help:"fraction by which each step's sequence length varies (dynamic shapes)"`
}

// DefaultTransformerTrain returns a small GPT-2-like model (6 layers, width
// 512, 8 heads, 32k vocabulary) trained for 8 steps on batches of 8
// sequences of up to 512 tokens, lengths varying by 25%: about 7,500 events,
// under 0.5 MB of JSONL.
func DefaultTransformerTrain() TransformerTrain {
	return TransformerTrain{
		Seed:      1,
		Layers:    6,
		Hidden:    512,
		Heads:     8,
		SeqLen:    512,
		Batch:     8,
		Steps:     8,
		Vocab:     32000,
		SeqJitter: 0.25,
	}
}

var _ Generator = TransformerTrain{}

// Header implements Generator.
func (c TransformerTrain) Header() trace.Header {
	name := fmt.Sprintf("transformer-train layers=%d hidden=%d seq-len=%d batch=%d steps=%d seed=%d",
		c.Layers, c.Hidden, c.SeqLen, c.Batch, c.Steps, c.Seed)
	return header("transformer-train", name, c)
}

// Validate reports the first invalid field, if any.
func (c TransformerTrain) Validate() error {
	ck := checker{workload: "transformer-train"}
	checkTransformerShape(&ck, c.Layers, c.Hidden, c.Heads, c.Vocab)
	ck.atLeast("SeqLen", int64(c.SeqLen), 1)
	ck.atLeast("Batch", int64(c.Batch), 1)
	ck.atLeast("Steps", int64(c.Steps), 0)
	ck.fraction("SeqJitter", c.SeqJitter)
	b, s := int64(c.Batch), int64(c.SeqLen)
	ck.bytes("the attention scores", b, int64(c.Heads), s, s, fp16Bytes)
	ck.bytes("the logits", b, s, int64(c.Vocab), fp32Bytes)
	ck.bytes("an MLP activation", b, s, mlpMult, int64(c.Hidden), fp16Bytes)
	return ck.err
}

// Generate implements Generator.
func (c TransformerTrain) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	g := &trainGen{
		c:      c,
		e:      newEmitter(emit, hbmBytesPerUS),
		rng:    newRand(c.Seed),
		params: transformerParams(c.Layers, c.Hidden, c.Vocab, c.SeqLen),
	}
	g.run()
	return g.e.err
}

// trainGen is the state of one TransformerTrain.Generate.
type trainGen struct {
	c      TransformerTrain
	e      *emitter
	rng    *rand.Rand
	params []param
	grads  []uint64 // this step's gradient of each parameter, 0 before backward reaches it
	adam   bool     // the optimizer state exists
	saved  []savedTensor

	// Shapes of the current step.
	tok    int64 // tokens in the batch, Batch·seq
	seq    int64
	act    int64 // bytes of one fp16 activation of width Hidden
	scores int64 // elements of one attention score matrix, Batch·Heads·seq²
}

// savedTensor is an activation autograd keeps for backward.
type savedTensor struct {
	id  uint64
	tag string
}

func (g *trainGen) run() {
	for _, p := range g.params {
		g.e.alloc(p.elems*fp16Bytes, p.name)
	}
	g.grads = make([]uint64, len(g.params))
	g.e.step(loadStep)
	for step := 0; step < g.c.Steps && g.e.err == nil; step++ {
		g.seq = int64(jittered(g.rng, g.c.SeqLen, g.c.SeqJitter, 8))
		g.tok = int64(g.c.Batch) * g.seq
		g.act = g.tok * int64(g.c.Hidden) * fp16Bytes
		g.scores = int64(g.c.Batch) * int64(g.c.Heads) * g.seq * g.seq

		ids := g.e.alloc(g.tok*int64Bytes, "input.ids")
		targets := g.e.alloc(g.tok*int64Bytes, "input.targets")
		g.embedForward()
		for l := range g.c.Layers {
			g.layerForward(l)
		}
		loss := g.headForward()

		dx := g.headBackward()
		for l := g.c.Layers - 1; l >= 0; l-- {
			dx = g.layerBackward(l, dx)
		}
		g.embedBackward(dx)
		if len(g.saved) != 0 {
			panic(fmt.Sprintf("gen: %d saved activations left after backward", len(g.saved)))
		}

		g.optimizerStep()
		g.e.free(loss)
		g.e.free(targets)
		g.e.free(ids)
		g.e.step(strconv.Itoa(step))
	}
}

// save allocates an activation that backward will need and pushes it.
func (g *trainGen) save(size int64, tag string) { g.keep(g.e.alloc(size, tag), tag) }

// keep pushes an allocated activation as saved for backward.
func (g *trainGen) keep(id uint64, tag string) { g.saved = append(g.saved, savedTensor{id, tag}) }

// pop frees the most recently saved activation, which must be tag: saved
// activations are freed in exactly the reverse order of their allocation.
func (g *trainGen) pop(tag string) {
	n := len(g.saved) - 1
	if n < 0 || g.saved[n].tag != tag {
		panic(fmt.Sprintf("gen: backward frees %s out of order", tag))
	}
	g.e.free(g.saved[n].id)
	g.saved = g.saved[:n]
}

// gemmWorkspaceMax is the most workspace a GEMM asks for: cuBLASLt's split-K
// workspace, which PyTorch sizes at a few MiB.
const gemmWorkspaceMax = 4 << 20

// gemm allocates a matrix multiply's workspace and output, frees the
// workspace, and returns the output.
func (g *trainGen) gemm(tag string, outBytes int64) uint64 {
	ws := g.e.alloc(min(outBytes, gemmWorkspaceMax), tag+".workspace")
	out := g.e.alloc(outBytes, tag)
	g.e.free(ws)
	return out
}

// grad allocates the gradient of parameter i unless this step already has it.
func (g *trainGen) grad(i int) {
	if g.grads[i] == 0 {
		g.grads[i] = g.e.alloc(g.params[i].elems*fp16Bytes, g.params[i].name+".grad")
	}
}

// layerGrads allocates the gradients of block l's parameters kinds.
func (g *trainGen) layerGrads(l int, kinds ...int) {
	for _, k := range kinds {
		g.grad(firstLayerParam + l*paramsPerLayer + k)
	}
}

// layerInput is the tag of the activation block l reads: the previous
// block's output, or the embedding's.
func layerInput(l int) string {
	if l == 0 {
		return "embed.out"
	}
	return layerName(l-1) + ".resid2"
}

func (g *trainGen) embedForward() {
	e := g.e
	tokOut := e.alloc(g.act, "embed.tok.out")
	posOut := e.alloc(g.seq*int64(g.c.Hidden)*fp16Bytes, "embed.pos.out")
	sum := e.alloc(g.act, "embed.sum")
	e.free(tokOut)
	e.free(posOut)
	g.save(g.tok*int64(g.c.Hidden)*maskBytes, "embed.dropout.mask")
	g.save(g.act, "embed.out")
	e.free(sum)
}

func (g *trainGen) layerForward(l int) {
	e, n := g.e, layerName(l)+"."
	act, hmask := g.act, g.tok*int64(g.c.Hidden)*maskBytes

	// Attention: ln1 → qkv → scores → softmax → dropout → probs·v → out proj.
	g.save(g.tok*fp32Bytes, n+"ln1.mean")
	g.save(g.tok*fp32Bytes, n+"ln1.rstd")
	g.save(act, n+"ln1.out")
	g.keep(g.gemm(n+"attn.qkv", 3*act), n+"attn.qkv")
	scores := e.alloc(g.scores*fp16Bytes, n+"attn.scores")
	g.save(g.scores*fp16Bytes, n+"attn.probs")
	e.free(scores)
	g.save(g.scores*maskBytes, n+"attn.dropout.mask")
	g.save(g.scores*fp16Bytes, n+"attn.probs.dropped")
	heads := e.alloc(act, n+"attn.ctx.heads") // batched matmul output, head-major
	g.save(act, n+"attn.ctx")                 // transposed back to token-major
	e.free(heads)
	out := g.gemm(n+"attn.out", act)
	g.save(hmask, n+"attn.out.dropout.mask")
	dropped := e.alloc(act, n+"attn.out.dropped")
	e.free(out)
	g.save(act, n+"resid1")
	e.free(dropped)

	// MLP: ln2 → fc1 → gelu → fc2 → dropout → residual.
	g.save(g.tok*fp32Bytes, n+"ln2.mean")
	g.save(g.tok*fp32Bytes, n+"ln2.rstd")
	g.save(act, n+"ln2.out")
	g.keep(g.gemm(n+"mlp.fc1", mlpMult*act), n+"mlp.fc1")
	g.save(mlpMult*act, n+"mlp.gelu")
	fc2 := g.gemm(n+"mlp.fc2", act)
	g.save(hmask, n+"mlp.dropout.mask")
	dropped = e.alloc(act, n+"mlp.dropped")
	e.free(fc2)
	g.save(act, n+"resid2")
	e.free(dropped)
}

// headForward runs ln_f, the tied LM head and the cross-entropy loss, in
// fp32 as autocast does; it returns the loss.
func (g *trainGen) headForward() uint64 {
	e := g.e
	logitsBytes := g.tok * int64(g.c.Vocab)
	g.save(g.tok*fp32Bytes, "ln_f.mean")
	g.save(g.tok*fp32Bytes, "ln_f.rstd")
	g.save(g.act, "ln_f.out")
	logits := g.gemm("lm_head.logits", logitsBytes*fp16Bytes)
	logits32 := e.alloc(logitsBytes*fp32Bytes, "loss.logits.fp32")
	e.free(logits)
	g.save(logitsBytes*fp32Bytes, "loss.log_softmax")
	e.free(logits32)
	return e.alloc(fp32Bytes, "loss.value")
}

// headBackward returns the gradient of the last block's output.
func (g *trainGen) headBackward() uint64 {
	e := g.e
	logitsBytes := g.tok * int64(g.c.Vocab)
	seed := e.alloc(fp32Bytes, "loss.grad")
	gls := e.alloc(logitsBytes*fp32Bytes, "loss.log_softmax.grad")
	e.free(seed)
	g.pop("loss.log_softmax")
	glogits := e.alloc(logitsBytes*fp16Bytes, "lm_head.logits.grad")
	e.free(gls)
	g.grad(pEmbedTok) // the head's weight is the token embedding
	gout := g.gemm("ln_f.out.grad", g.act)
	e.free(glogits)
	g.pop("ln_f.out")
	lnf := firstLayerParam + g.c.Layers*paramsPerLayer
	g.grad(lnf)
	g.grad(lnf + 1)
	dx := e.alloc(g.act, "ln_f.in.grad")
	e.free(gout)
	g.pop("ln_f.rstd")
	g.pop("ln_f.mean")
	g.pop(layerInput(g.c.Layers))
	return dx
}

// layerBackward takes the gradient of block l's output and returns the
// gradient of its input. The residual stream's gradient dx feeds both the
// branch and the skip connection; the two are summed at the branch's input.
func (g *trainGen) layerBackward(l int, dx uint64) uint64 {
	e, n := g.e, layerName(l)+"."
	act, sc := g.act, g.scores*fp16Bytes

	// MLP branch.
	gd := e.alloc(act, n+"mlp.dropped.grad")
	g.pop(n + "mlp.dropout.mask")
	g.layerGrads(l, pFC2W, pFC2B)
	ggelu := g.gemm(n+"mlp.gelu.grad", mlpMult*act)
	e.free(gd)
	g.pop(n + "mlp.gelu")
	gfc1 := e.alloc(mlpMult*act, n+"mlp.fc1.grad")
	e.free(ggelu)
	g.pop(n + "mlp.fc1")
	g.layerGrads(l, pFC1W, pFC1B)
	gln2 := g.gemm(n+"ln2.out.grad", act)
	e.free(gfc1)
	g.pop(n + "ln2.out")
	g.layerGrads(l, pLN2W, pLN2B)
	gin := e.alloc(act, n+"ln2.in.grad")
	e.free(gln2)
	g.pop(n + "ln2.rstd")
	g.pop(n + "ln2.mean")
	g.pop(n + "resid1")
	dx1 := e.alloc(act, n+"resid1.grad")
	e.free(dx)
	e.free(gin)

	// Attention branch.
	god := e.alloc(act, n+"attn.out.dropped.grad")
	g.pop(n + "attn.out.dropout.mask")
	g.layerGrads(l, pOutW, pOutB)
	gctx := g.gemm(n+"attn.ctx.grad", act)
	e.free(god)
	g.pop(n + "attn.ctx")
	gqkv := e.alloc(3*act, n+"attn.qkv.grad") // dv now, dq and dk below
	gpd := e.alloc(sc, n+"attn.probs.dropped.grad")
	e.free(gctx)
	g.pop(n + "attn.probs.dropped")
	gp := e.alloc(sc, n+"attn.probs.grad")
	e.free(gpd)
	g.pop(n + "attn.dropout.mask")
	gs := e.alloc(sc, n+"attn.scores.grad")
	e.free(gp)
	g.pop(n + "attn.probs")
	e.free(gs)
	g.pop(n + "attn.qkv")
	g.layerGrads(l, pQKVW, pQKVB)
	gln1 := g.gemm(n+"ln1.out.grad", act)
	e.free(gqkv)
	g.pop(n + "ln1.out")
	g.layerGrads(l, pLN1W, pLN1B)
	gin = e.alloc(act, n+"ln1.in.grad")
	e.free(gln1)
	g.pop(n + "ln1.rstd")
	g.pop(n + "ln1.mean")
	g.pop(layerInput(l))
	dx0 := e.alloc(act, n+"resid0.grad")
	e.free(dx1)
	e.free(gin)
	return dx0
}

func (g *trainGen) embedBackward(dx uint64) {
	e := g.e
	gd := e.alloc(g.act, "embed.dropped.grad")
	e.free(dx)
	g.pop("embed.dropout.mask")
	g.grad(pEmbedPos)
	// embedding_dense_backward builds a full-size gradient, which is then
	// accumulated into the one the tied LM head made.
	dense := e.alloc(g.params[pEmbedTok].elems*fp16Bytes, "embed.tok.weight.grad.dense")
	e.free(dense)
	e.free(gd)
}

// optimizerStep runs Adam over every parameter, creating its state on the
// first step, then frees the gradients.
func (g *trainGen) optimizerStep() {
	e := g.e
	foundInf := e.alloc(fp32Bytes, "amp.found_inf")
	for i, p := range g.params {
		if g.grads[i] == 0 {
			panic("gen: parameter " + p.name + " has no gradient")
		}
		if !g.adam {
			e.alloc(p.elems*fp32Bytes, p.name+".master")
			e.alloc(p.elems*fp32Bytes, p.name+".adam.exp_avg")
			e.alloc(p.elems*fp32Bytes, p.name+".adam.exp_avg_sq")
		}
		g32 := e.alloc(p.elems*fp32Bytes, p.name+".grad.fp32")
		e.free(g32)
	}
	g.adam = true
	e.free(foundInf)
	for i, id := range g.grads {
		e.free(id)
		g.grads[i] = 0
	}
}
