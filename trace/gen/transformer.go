package gen

import "strconv"

// This file holds what the training and the inference transformer share: a
// GPT-2-style decoder (pre-layernorm blocks, learned position embedding,
// language-model head tied to the token embedding) and its parameters.

// Parameters of one transformer block, in the order named_parameters()
// lists them; a block's parameter i is params[firstLayerParam+l*paramsPerLayer+i].
const (
	pLN1W = iota
	pLN1B
	pQKVW
	pQKVB
	pOutW
	pOutB
	pLN2W
	pLN2B
	pFC1W
	pFC1B
	pFC2W
	pFC2B
	paramsPerLayer
)

// Indices of the parameters outside the blocks.
const (
	pEmbedTok       = 0 // token embedding, also the LM head's weight (tied)
	pEmbedPos       = 1 // position embedding
	firstLayerParam = 2
)

// mlpMult is the width of the MLP's hidden layer relative to the model's.
const mlpMult = 4

// param is one weight tensor: its name and its number of elements.
type param struct {
	name  string
	elems int64
}

// transformerParams lists the parameters of a model with the given shape:
// the embeddings, the blocks, then the final layernorm (ln_f).
func transformerParams(layers, hidden, vocab, positions int) []param {
	h, v := int64(hidden), int64(vocab)
	ps := []param{
		{"embed.tok.weight", v * h},
		{"embed.pos.weight", int64(positions) * h},
	}
	for l := range layers {
		n := layerName(l) + "."
		ps = append(ps,
			param{n + "ln1.weight", h},
			param{n + "ln1.bias", h},
			param{n + "attn.qkv.weight", 3 * h * h},
			param{n + "attn.qkv.bias", 3 * h},
			param{n + "attn.out.weight", h * h},
			param{n + "attn.out.bias", h},
			param{n + "ln2.weight", h},
			param{n + "ln2.bias", h},
			param{n + "mlp.fc1.weight", mlpMult * h * h},
			param{n + "mlp.fc1.bias", mlpMult * h},
			param{n + "mlp.fc2.weight", h * mlpMult * h},
			param{n + "mlp.fc2.bias", h},
		)
	}
	return append(ps, param{"ln_f.weight", h}, param{"ln_f.bias", h})
}

func layerName(l int) string { return "layer" + strconv.Itoa(l) }

// checkTransformerShape validates the fields both transformer workloads have.
func checkTransformerShape(c *checker, layers, hidden, heads, vocab int) {
	c.atLeast("Layers", int64(layers), 1)
	c.atLeast("Hidden", int64(hidden), 1)
	c.atLeast("Heads", int64(heads), 1)
	c.atLeast("Vocab", int64(vocab), 1)
	c.atMost("Layers", int64(layers), 10_000)
	if c.err == nil && hidden%heads != 0 {
		c.fail("heads (%d) must divide hidden (%d)", heads, hidden)
	}
	c.bytes("the MLP weight", mlpMult, int64(hidden), int64(hidden), fp32Bytes)
	c.bytes("the embedding", int64(vocab), int64(hidden), fp32Bytes)
}
