package train

import (
	"fmt"
	"io"
	"math"
	"reflect"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// EvalResult is a test-set evaluation.
type EvalResult struct {
	Epoch    int     `json:"epoch"` // epochs trained when it was measured
	Step     int     `json:"step"`
	Examples int     `json:"examples"`
	Correct  int64   `json:"correct"`
	Total    int64   `json:"total"` // labels scored (pixels for segmentation)
	Accuracy float64 `json:"accuracy"`
	HasAcc   bool    `json:"has_accuracy"`
	Loss     float64 `json:"loss"`
}

func (r EvalResult) String() string {
	acc := "n/a"
	if r.HasAcc {
		acc = fmt.Sprintf("%.4f (%d/%d)", r.Accuracy, r.Correct, r.Total)
	}
	return fmt.Sprintf("test accuracy %s, test loss %.4f on %d examples", acc, r.Loss, r.Examples)
}

// evaluator runs the model's forward pass on test batches: the training
// graph compiled with ooc.Inference(), which leaves the backward out and
// takes the scheduler and budget of the run, with the learnables and batch
// norms the training uses. Batch norms (and any other gorgonia.TrainModeOp)
// run in inference mode while it evaluates.
type evaluator struct {
	graph         *G.ExprGraph
	input, labels *G.Node
	logits, loss  *G.Node // logits nil when unknown
	outs          []*G.Node
	modes         []G.TrainModeOp
	bns           []batchNorm
	machine       *vm.Machine
	// Note says where the logits come from, or why accuracy is not measured.
	Note string
}

// findLogits returns the model's logits node: its Logits field or method
// where the model has one, else the operand of the (log-)softmax in the loss.
func findLogits(m *models.Model) (*G.Node, string) {
	rv := reflect.ValueOf(m).Elem()
	if f := rv.FieldByName("Logits"); f.IsValid() && f.Type() == reflect.TypeOf((*G.Node)(nil)) && !f.IsNil() {
		return f.Interface().(*G.Node), "the model's Logits node"
	}
	if lm, ok := any(m).(interface{ Logits() *G.Node }); ok && lm.Logits() != nil {
		return lm.Logits(), "the model's Logits node"
	}
	var found []*G.Node
	seen := map[*G.Node]bool{}
	var walk func(n *G.Node)
	walk = func(n *G.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.Op() != nil && fmt.Sprintf("%T", n.Op()) == "*gorgonia.softmaxOp" {
			if k := ooc.Operands(n); len(k) == 1 {
				found = append(found, k[0])
			}
		}
		for _, c := range ooc.Operands(n) {
			walk(c)
		}
	}
	walk(m.Loss)
	want := m.Labels.Shape()
	if len(found) == 1 && found[0].Shape().Eq(want) {
		return found[0], "the operand of the loss's softmax (the model exposes no Logits node)"
	}
	return nil, "accuracy not measured: the model exposes no Logits node and its loss has no single softmax to find them by; test loss only"
}

// newEvaluator readies the model's forward pass; compile makes it runnable.
func newEvaluator(m *models.Model, bns []batchNorm) (*evaluator, error) {
	ev := &evaluator{graph: m.Graph, input: m.Input, labels: m.Labels, loss: m.Loss, bns: bns}
	ev.logits, ev.Note = findLogits(m)
	if ev.logits != nil {
		ev.outs = append(ev.outs, ev.logits)
	}
	ev.outs = append(ev.outs, ev.loss)
	return ev, nil
}

// options are what every compile and plan of the forward pass takes.
func (ev *evaluator) options(opts ...ooc.Option) []ooc.Option {
	return append([]ooc.Option{ooc.Inference(), ooc.WithOutputs(ev.outs...), ooc.WithNodeValues(0)}, opts...)
}

// inCorePeak is the device memory the forward pass needs without swapping.
func (ev *evaluator) inCorePeak() (int64, error) {
	p, err := ooc.Plan(ev.graph, ev.options(ooc.Baseline())...)
	if err != nil {
		return 0, err
	}
	return p.Peak, nil
}

// compile makes the machine that runs the forward pass, with the scheduler,
// budget and allocator options given. Making an inference machine puts the
// graph's training-mode ops in inference mode, as gorgonia's EvalMode does;
// they go back to training mode (running statistics untouched) for the
// training machine that shares them, and evaluate switches them as it runs.
func (ev *evaluator) compile(opts ...ooc.Option) (err error) {
	snap, err := snapshotBN(ev.bns)
	if err != nil {
		return err
	}
	ev.machine, err = ooc.Compile(ev.graph, ev.options(opts...)...)
	if err != nil {
		return fmt.Errorf("compiling the forward pass: %w", err)
	}
	seen := map[uintptr]bool{}
	for _, f := range ev.machine.Program().Funcs {
		if tm, ok := f.Op.(G.TrainModeOp); ok {
			if key, ok := opIdentity(tm); !ok || !seen[key] {
				seen[key] = true
				ev.modes = append(ev.modes, tm)
			}
		}
	}
	return ev.trainingMode(snap)
}

// trainingMode puts the training-mode ops back in training mode with the
// running statistics of snap (gorgonia's BatchNormOp resets them when
// switched to training).
func (ev *evaluator) trainingMode(snap bnSnapshot) error {
	for _, tm := range ev.modes {
		if err := tm.SetTraining(true); err != nil {
			return err
		}
	}
	return snap.restore(ev.bns)
}

func (ev *evaluator) Close() error {
	if ev == nil || ev.machine == nil {
		return nil
	}
	return ev.machine.Close()
}

// evaluate runs one pass over ds with the loader options (the training run's
// shape, dtype and normalisation; no shuffling or augmentation).
func (ev *evaluator) evaluate(ds datasets.Dataset, opt datasets.Options) (res EvalResult, err error) {
	opt.Shuffle, opt.RandomCrop, opt.Flip = false, 0, false
	opt.Epochs, opt.StartEpoch, opt.StartBatch = 1, 0, 0
	opt.Last = datasets.PadLast
	l, err := datasets.NewLoader(ds, opt)
	if err != nil {
		return res, err
	}
	defer l.Close()

	// Inference mode; afterwards training mode with the running statistics
	// exactly as they were (gorgonia's BatchNormOp resets them on
	// SetTraining(true)).
	snap, err := snapshotBN(ev.bns)
	if err != nil {
		return res, err
	}
	for _, tm := range ev.modes {
		if err := tm.SetTraining(false); err != nil {
			return res, err
		}
	}
	defer func() {
		if e := ev.trainingMode(snap); e != nil && err == nil {
			err = e
		}
	}()
	var lossSum float64
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		if err := G.Let(ev.input, b.X); err != nil {
			return res, err
		}
		if ev.labels != nil {
			if err := G.Let(ev.labels, b.Y); err != nil {
				return res, err
			}
		}
		// Like TapeMachine's, the machine runs again only after Reset.
		ev.machine.Reset()
		if err := ev.machine.RunAll(); err != nil {
			ev.machine.Reset()
			return res, err
		}
		rows := b.X.Shape()[0]
		loss, err := scalarOf(ev.loss.Value())
		if err != nil {
			return res, fmt.Errorf("test loss: %w", err)
		}
		// The loss is a mean over the rows; padding rows have all-zero targets
		// and add nothing to the sum.
		lossSum += loss * float64(rows)
		res.Examples += b.N
		if ev.logits != nil {
			c, t, err := countCorrect(ev.logits.Value(), b.Labels)
			if err != nil {
				return res, err
			}
			res.Correct += c
			res.Total += t
		}
	}
	if res.Examples > 0 {
		res.Loss = lossSum / float64(res.Examples)
	}
	if ev.logits != nil && res.Total > 0 {
		res.HasAcc = true
		res.Accuracy = float64(res.Correct) / float64(res.Total)
	}
	return res, nil
}

// countCorrect compares the argmax over the class axis (axis 1) of (N,K) or
// (N,K,H,W) logits with the labels (N or N*H*W of them); labels < 0 are padding.
func countCorrect(v G.Value, labels []int) (correct, total int64, err error) {
	t, ok := v.(tensor.Tensor)
	if !ok {
		return 0, 0, fmt.Errorf("logits are a %T", v)
	}
	s := t.Shape()
	if s.Dims() < 2 {
		return 0, 0, fmt.Errorf("logits of shape %v have no class axis", s)
	}
	n, k := s[0], s[1]
	plane := s.TotalSize() / (n * k)
	if len(labels) != n*plane {
		return 0, 0, fmt.Errorf("%d labels for logits of shape %v", len(labels), s)
	}
	var at func(i int) float64
	switch d := t.Data().(type) {
	case []float32:
		at = func(i int) float64 { return float64(d[i]) }
	case []float64:
		at = func(i int) float64 { return d[i] }
	default:
		return 0, 0, fmt.Errorf("logits of dtype %v", t.Dtype())
	}
	for i := 0; i < n; i++ {
		for p := 0; p < plane; p++ {
			label := labels[i*plane+p]
			if label < 0 {
				continue
			}
			best, arg := math.Inf(-1), -1
			for c := 0; c < k; c++ {
				if x := at((i*k+c)*plane + p); x > best || arg < 0 {
					best, arg = x, c
				}
			}
			total++
			if arg == label {
				correct++
			}
		}
	}
	return correct, total, nil
}

// scalarOf reads a scalar value (the loss).
func scalarOf(v G.Value) (float64, error) { return layers.Scalar(v) }
