package models

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// ---- LSTM language model (Zaremba et al. 2014; PyTorch's word_language_model) ----

// lstmLayers is the depth of the stack, as Zaremba et al.'s models and PyTorch's example default.
const lstmLayers = 2

// lstmLM predicts the next token at every step of a SeqLen-long sequence: an embedding of width
// Hidden, two LSTM layers of width Hidden unrolled over the sequence in the graph, and a linear
// decoder to Vocab scores at every step (a 1x1 convolution over the (N, Hidden, 1, SeqLen)
// sequence, which is a linear layer applied at each step), with the softmax cross-entropy
// averaged over the batch and the steps. Each sequence starts from a zero state. Names and
// initialisation are PyTorch's example's: encoder and decoder weights U(-0.1, 0.1), decoder bias
// 0, LSTM weights and biases U(±1/sqrt(Hidden)); "rnn.weight_ih_l0" is stored (in, 4H), the
// transpose of PyTorch's, like every linear weight here. Dropout is omitted, as elsewhere.
func lstmLM() arch {
	return arch{pixel: true, tokens: true, normalize: lstmNormalize, forward: lstm}
}

func lstmNormalize(cfg Config) (Config, error) {
	if cfg.Channels > 1 || cfg.Height > 1 {
		return cfg, fmt.Errorf("it reads (Batch, 1, 1, SeqLen) token ids: channels and height must be 0 or 1, got %d and %d", cfg.Channels, cfg.Height)
	}
	if cfg.SeqLen == 0 {
		cfg.SeqLen = cfg.Width
	}
	if cfg.Vocab == 0 {
		cfg.Vocab = cfg.Classes
	}
	if (cfg.Width != 0 && cfg.Width != cfg.SeqLen) || (cfg.Classes != 0 && cfg.Classes != cfg.Vocab) {
		return cfg, fmt.Errorf("width %d and classes %d must be 0 or equal SeqLen %d and Vocab %d", cfg.Width, cfg.Classes, cfg.SeqLen, cfg.Vocab)
	}
	if cfg.Hidden == 0 {
		cfg.Hidden = 650
	}
	if cfg.Hidden < 0 {
		return cfg, fmt.Errorf("hidden width %d", cfg.Hidden)
	}
	cfg.Channels, cfg.Height, cfg.Width, cfg.Classes = 1, 1, cfg.SeqLen, cfg.Vocab
	return cfg, nil
}

func lstm(n *net, ids *G.Node, cfg Config) *G.Node {
	H, V, N := n.ch(cfg.Hidden), cfg.Classes, cfg.Batch
	bound := 1 / math.Sqrt(float64(H))
	weight := func(name string, init func() float64, shape ...int) *G.Node {
		return n.do(name, func() (*G.Node, error) { return n.b.Weight(name, shape, init) })
	}
	table := weight("encoder.weight", n.b.Uniform(0.1), V, H)
	emb := n.do("encoder", func() (*G.Node, error) { return layers.Embedding(ids, table) })
	// The zero initial state, one input node shared by every layer's h and c.
	zeros := n.do("rnn.zeros", func() (*G.Node, error) {
		z, err := n.b.Input("rnn.zeros", N, H)
		if err != nil {
			return nil, err
		}
		return z, G.Let(z, tensor.New(tensor.Of(n.b.Dtype()), tensor.WithShape(N, H)))
	})
	xs := make([]*G.Node, cfg.SeqLen)
	for t := range xs {
		xs[t] = n.do("encoder.step", func() (*G.Node, error) { return layers.SequenceStep(emb, t) })
	}
	in := H
	for l := 0; l < lstmLayers; l++ {
		wih := weight(fmt.Sprintf("rnn.weight_ih_l%d", l), n.b.Uniform(bound), in, 4*H)
		whh := weight(fmt.Sprintf("rnn.weight_hh_l%d", l), n.b.Uniform(bound), H, 4*H)
		bih := weight(fmt.Sprintf("rnn.bias_ih_l%d", l), n.b.Uniform(bound), 4*H)
		bhh := weight(fmt.Sprintf("rnn.bias_hh_l%d", l), n.b.Uniform(bound), 4*H)
		h, c := zeros, zeros
		for t, x := range xs {
			name := fmt.Sprintf("rnn.l%d.t%d", l, t)
			pre := n.do(name, func() (*G.Node, error) {
				xw, err := G.Mul(x, wih)
				if err != nil {
					return nil, err
				}
				hw, err := G.Mul(h, whh)
				if err != nil {
					return nil, err
				}
				return layers.LSTMGates(xw, hw, bih, bhh)
			})
			c = n.do(name+".c", func() (*G.Node, error) { return layers.LSTMCell(pre, c) })
			h = n.do(name+".h", func() (*G.Node, error) { return layers.LSTMHidden(pre, c) })
			xs[t] = h
		}
		in = H
	}
	seq := n.do("rnn.output", func() (*G.Node, error) { return layers.StackSequence(xs...) })
	return n.convInit(seq, V, 1, 1, layers.ConvParams{}, "decoder", n.b.Uniform(0.1), layers.Constant(0))
}
