package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// TransformerInfer models autoregressive decoding with a GPT-2-style decoder
// in fp16, the way a naive framework (Hugging Face transformers before static
// caches) allocates:
//
//  1. At the start, the weights, never freed, then a step named "load" that
//     ends the loading phase.
//  2. Each request (a batch of Batch sequences of one prompt length):
//     prefill runs the whole prompt through every block, creating each
//     block's key and value caches, and computes logits for every prompt
//     position.
//  3. Then, per generated token, every block grows its key and value caches
//     by concatenation: a new tensor one token longer is allocated and the
//     old one freed. Activations are freed as soon as they are consumed (no
//     autograd), and the token ids grow by concatenation too.
//  4. At the end of the request the caches and ids are freed and a step
//     event, named by the request's 0-based index, separates it from the
//     next.
//
// The ever-growing caches leave holes just too small for their next size,
// and requests of different lengths (LenJitter) change every shape.
type TransformerInfer struct {
	// Seed drives the request lengths (see LenJitter).
	Seed uint64 `help:"seed for prompt and generation lengths"`
	// Layers is the number of transformer blocks.
	Layers int `help:"transformer blocks"`
	// Hidden is the model width, in elements (d_model).
	Hidden int `help:"model width d_model (elements)"`
	// Heads is the number of attention heads; it must divide Hidden.
	Heads int `help:"attention heads (must divide hidden)"`
	// Vocab is the vocabulary size, in tokens.
	Vocab int `help:"vocabulary size (tokens)"`
	// PromptLen is the longest prompt, in tokens.
	PromptLen int `help:"longest prompt (tokens)"`
	// GenTokens is the most tokens generated per request.
	GenTokens int `help:"most tokens generated per request"`
	// Requests is the number of requests served one after another.
	Requests int `help:"requests served, separated by step events"`
	// Batch is the number of sequences decoded together in a request.
	Batch int `help:"sequences per request"`
	// LenJitter is the fraction by which request lengths vary: a request's
	// prompt length is uniform in [(1−LenJitter)·PromptLen, PromptLen] and
	// its generated token count in [(1−LenJitter)·GenTokens, GenTokens].
	LenJitter float64 `help:"fraction by which prompt and generation lengths vary"`
}

// DefaultTransformerInfer returns a 4-layer, width-512 model serving 4
// requests of 4 sequences, prompts of up to 128 tokens and up to 32
// generated tokens, lengths varying by half: about 13,000 events, under
// 0.8 MB of JSONL.
func DefaultTransformerInfer() TransformerInfer {
	return TransformerInfer{
		Seed:      1,
		Layers:    4,
		Hidden:    512,
		Heads:     8,
		Vocab:     32000,
		PromptLen: 128,
		GenTokens: 32,
		Requests:  4,
		Batch:     4,
		LenJitter: 0.5,
	}
}

var _ Generator = TransformerInfer{}

// Header implements Generator.
func (c TransformerInfer) Header() trace.Header {
	name := fmt.Sprintf("transformer-infer layers=%d hidden=%d prompt-len=%d gen-tokens=%d requests=%d batch=%d seed=%d",
		c.Layers, c.Hidden, c.PromptLen, c.GenTokens, c.Requests, c.Batch, c.Seed)
	return header("transformer-infer", name, c)
}

// Validate reports the first invalid field, if any.
func (c TransformerInfer) Validate() error {
	ck := checker{workload: "transformer-infer"}
	checkTransformerShape(&ck, c.Layers, c.Hidden, c.Heads, c.Vocab)
	ck.atLeast("PromptLen", int64(c.PromptLen), 1)
	ck.atLeast("GenTokens", int64(c.GenTokens), 1)
	ck.atLeast("Requests", int64(c.Requests), 0)
	ck.atLeast("Batch", int64(c.Batch), 1)
	ck.fraction("LenJitter", c.LenJitter)
	b, p, n := int64(c.Batch), int64(c.PromptLen), int64(c.PromptLen)+int64(c.GenTokens)
	ck.bytes("the attention scores", b, int64(c.Heads), p, n, fp16Bytes)
	ck.bytes("the prefill logits", b, p, int64(c.Vocab), fp16Bytes)
	ck.bytes("the KV cache", b, n, int64(c.Hidden), fp16Bytes)
	ck.bytes("an MLP activation", b, p, mlpMult, int64(c.Hidden), fp16Bytes)
	return ck.err
}

// Generate implements Generator.
func (c TransformerInfer) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	g := &inferGen{
		c:   c,
		e:   newEmitter(emit, hbmBytesPerUS),
		rng: newRand(c.Seed),
		b:   int64(c.Batch),
		h:   int64(c.Hidden),
		kv:  make([]uint64, 2*c.Layers),
	}
	g.run()
	return g.e.err
}

// inferGen is the state of one TransformerInfer.Generate.
type inferGen struct {
	c    TransformerInfer
	e    *emitter
	rng  *rand.Rand
	b, h int64
	kv   []uint64 // the key and value caches of block l at 2l and 2l+1; 0 when none
}

func (g *inferGen) run() {
	for _, p := range transformerParams(g.c.Layers, g.c.Hidden, g.c.Vocab, g.c.PromptLen+g.c.GenTokens) {
		g.e.alloc(p.elems*fp16Bytes, p.name)
	}
	g.e.step(loadStep)
	for r := 0; r < g.c.Requests && g.e.err == nil; r++ {
		prompt := int64(jittered(g.rng, g.c.PromptLen, g.c.LenJitter, 1))
		gen := int64(jittered(g.rng, g.c.GenTokens, g.c.LenJitter, 1))

		ids := g.e.alloc(g.b*prompt*int64Bytes, "input.ids")
		// Prefill: the prompt's queries against a cache of the prompt.
		x := g.e.alloc(g.b*prompt*g.h*fp16Bytes, "embed.out")
		for l := range g.c.Layers {
			x = g.block(l, prompt, prompt, x)
		}
		ids = g.head(prompt, x, ids, prompt)
		// Decode: one query per step against a cache one token longer.
		for i := int64(1); i < gen && g.e.err == nil; i++ {
			n := prompt + i
			x = g.e.alloc(g.b*g.h*fp16Bytes, "embed.out")
			for l := range g.c.Layers {
				x = g.block(l, 1, n, x)
			}
			ids = g.head(1, x, ids, n)
		}
		for i, id := range g.kv {
			g.e.free(id)
			g.kv[i] = 0
		}
		g.e.free(ids)
		g.e.step(strconv.Itoa(r))
	}
}

// block runs block l for q query tokens against a key/value cache that holds
// n tokens once this step's are appended; x is the block's input, freed once
// consumed, and the block's output is returned.
func (g *inferGen) block(l int, q, n int64, x uint64) uint64 {
	e, name := g.e, layerName(l)+"."
	b, h := g.b, g.h
	act := b * q * h * fp16Bytes

	ln1 := e.alloc(act, name+"ln1.out")
	qkv := e.alloc(3*act, name+"attn.qkv")
	e.free(ln1)
	for j, cache := range [2]string{"attn.cache.k", "attn.cache.v"} {
		grown := e.alloc(b*n*h*fp16Bytes, name+cache) // torch.cat([past, new])
		if old := g.kv[2*l+j]; old != 0 {
			e.free(old)
		}
		g.kv[2*l+j] = grown
	}
	scoreBytes := b * int64(g.c.Heads) * q * n * fp16Bytes
	scores := e.alloc(scoreBytes, name+"attn.scores")
	probs := e.alloc(scoreBytes, name+"attn.probs")
	e.free(scores)
	ctx := e.alloc(act, name+"attn.ctx")
	e.free(probs)
	e.free(qkv)
	out := e.alloc(act, name+"attn.out")
	e.free(ctx)
	resid1 := e.alloc(act, name+"resid1")
	e.free(out)
	e.free(x)

	ln2 := e.alloc(act, name+"ln2.out")
	fc1 := e.alloc(mlpMult*act, name+"mlp.fc1")
	e.free(ln2)
	gelu := e.alloc(mlpMult*act, name+"mlp.gelu")
	e.free(fc1)
	fc2 := e.alloc(act, name+"mlp.fc2")
	e.free(gelu)
	resid2 := e.alloc(act, name+"resid2")
	e.free(fc2)
	e.free(resid1)
	return resid2
}

// head runs ln_f and the LM head over q positions of x (freeing x), samples
// the next token of each sequence from the last position, and appends it to
// ids, which hold idsLen tokens per sequence; it returns the new ids.
func (g *inferGen) head(q int64, x, ids uint64, idsLen int64) uint64 {
	e, b, v := g.e, g.b, int64(g.c.Vocab)
	lnf := e.alloc(b*q*g.h*fp16Bytes, "ln_f.out")
	e.free(x)
	logits := e.alloc(b*q*v*fp16Bytes, "lm_head.logits")
	e.free(lnf)
	probs := e.alloc(b*v*fp32Bytes, "sample.probs")
	e.free(logits)
	next := e.alloc(b*int64Bytes, "sample.next")
	e.free(probs)
	grown := e.alloc(b*(idsLen+1)*int64Bytes, "input.ids") // torch.cat([ids, next])
	e.free(ids)
	e.free(next)
	return grown
}
