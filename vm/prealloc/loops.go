package prealloc

import (
	"fmt"
	"reflect"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Ops whose Do is a plain loop with no prealloc path of its own (or a
// broken one): the loop is rewritten here to write into out, keeping Do's
// arithmetic and its order.

// dropoutOp.UsePreallocDo hands its kernel the method value
// inputTensor.Data instead of the data, so it always panics in v0.9.18.
// Do draws one number per element from the op's generator, in order, and
// writes the kept elements, scaled, into a zeroed tensor.
func buildDropout(op gorgonia.Op) (Func, error) {
	prob, err := floatField(op, "probability")
	if err != nil {
		return nil, err
	}
	trainingP, _, err := fieldAddr(op, "isTraining", reflect.Bool)
	if err != nil {
		return nil, err
	}
	genP, genT, err := fieldAddr(op, "rndGen", reflect.Func)
	if err != nil {
		return nil, err
	}
	if genT.NumIn() != 0 || genT.NumOut() != 1 || genT.Out(0).Kind() != reflect.Float64 || genT.IsVariadic() {
		return nil, fmt.Errorf("dropout's generator is a %v, not a func() float64", genT)
	}
	training := (*bool)(trainingP)
	gen := (*func() float64)(genP)
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if prob == 0 || !*training {
			return copyDenseInto(out, x) // Do returns x itself
		}
		xb, err := contiguousBytes(x)
		if err != nil {
			return err // Do's kernel reads a view's raw backing: not reproduced
		}
		n := x.Shape().TotalSize()
		ob, err := outBytes(out, x.Dtype(), n)
		if err != nil {
			return err
		}
		if overlap(ob, xb) {
			return fmt.Errorf("out overlaps the input")
		}
		rnd := *gen
		if rnd == nil {
			return fmt.Errorf("dropout op has no generator")
		}
		keep := 1.0 - prob
		switch x.Dtype() {
		case tensor.Float32:
			in, o := asSlice[float32](xb), asSlice[float32](ob)
			for i, d := range in {
				if r := float32(rnd()); r < float32(keep) {
					o[i] = d / float32(keep)
				} else {
					o[i] = 0
				}
			}
		case tensor.Float64:
			in, o := asSlice[float64](xb), asSlice[float64](ob)
			for i, d := range in {
				if r := rnd(); r < keep {
					o[i] = d / keep
				} else {
					o[i] = 0
				}
			}
		default:
			return fmt.Errorf("dropout of %v", x.Dtype()) // Do panics
		}
		return nil
	}, nil
}

// upsampleDiffOp's Do sums each (s+1)x(s+1) block of the output gradient
// in a float64, row by row, and stores it (converted for float32).
func buildUpsampleDiff(op gorgonia.Op) (Func, error) {
	stride, err := intField(op, "stride")
	if err != nil {
		return nil, err
	}
	if stride < 0 {
		return nil, fmt.Errorf("upsample stride %d", stride)
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 3); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		pooled, err := denseArg(inputs, 1)
		if err != nil {
			return err
		}
		grad, err := denseArg(inputs, 2)
		if err != nil {
			return err
		}
		xs := x.Shape()
		if xs.Dims() != 4 {
			return fmt.Errorf("upsample input of shape %v, want 4 dimensions", xs)
		}
		b, c, h, w := xs[0], xs[1], xs[2], xs[3]
		f := stride + 1
		ob, err := outBytes(out, x.Dtype(), b*c*h*w)
		if err != nil {
			return err
		}
		gl, err := denseLayout(grad)
		if err != nil {
			return err
		}
		if len(gl.shape) != 4 || gl.shape[0] < b || gl.shape[1] < c || gl.shape[2] < h*f || gl.shape[3] < w*f {
			return fmt.Errorf("output gradient of shape %v for input %v", grad.Shape(), xs)
		}
		if overlap(ob, gl.data[:gl.maxByte()]) {
			return fmt.Errorf("out overlaps the gradient")
		}
		dt := pooled.Dtype()
		if (dt == tensor.Float32 || dt == tensor.Float64) && (dt != x.Dtype() || dt != grad.Dtype()) {
			return fmt.Errorf("upsample gradient of mixed dtypes %v, %v, %v", x.Dtype(), dt, grad.Dtype())
		}
		zero(ob) // Do's result is a fresh tensor; other dtypes stay zero
		gs := gl.strides
		switch dt {
		case tensor.Float64:
			upsampleDiff(asSlice[float64](ob), asSlice[float64](gl.data), gs, b, c, h, w, f)
		case tensor.Float32:
			upsampleDiff(asSlice[float32](ob), asSlice[float32](gl.data), gs, b, c, h, w, f)
		}
		return nil
	}, nil
}

func upsampleDiff[T float32 | float64](out, g []T, gs []int, b, c, h, w, f int) {
	i := 0
	for bi := 0; bi < b; bi++ {
		for ci := 0; ci < c; ci++ {
			for hi := 0; hi < h; hi++ {
				for wi := 0; wi < w; wi++ {
					sum := 0.
					for sh := 0; sh < f; sh++ {
						for sw := 0; sw < f; sw++ {
							sum += float64(g[bi*gs[0]+ci*gs[1]+(hi*f+sh)*gs[2]+(wi*f+sw)*gs[3]])
						}
					}
					out[i] = T(sum)
					i++
				}
			}
		}
	}
}

// globalAveragePoolOp's Do sums each (h, w) plane in the input's dtype,
// row by row, and divides once.
func buildGlobalAvgPool(op gorgonia.Op) (Func, error) {
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		xl, err := denseLayout(x)
		if err != nil {
			return err
		}
		if len(xl.shape) != 4 {
			return fmt.Errorf("global average pool of shape %v, want 4 dimensions", x.Shape())
		}
		b, c := xl.shape[0], xl.shape[1]
		ob, err := outBytes(out, x.Dtype(), b*c)
		if err != nil {
			return err
		}
		if overlap(ob, xl.data[:xl.maxByte()]) {
			return fmt.Errorf("out overlaps the input")
		}
		switch x.Dtype() {
		case tensor.Float64:
			gap(asSlice[float64](ob), asSlice[float64](xl.data), xl.shape, xl.strides)
		case tensor.Float32:
			gap(asSlice[float32](ob), asSlice[float32](xl.data), xl.shape, xl.strides)
		default:
			return fmt.Errorf("global average pool of %v", x.Dtype())
		}
		return nil
	}, nil
}

func gap[T float32 | float64](out, x []T, shape, st []int) {
	B, C, H, W := shape[0], shape[1], shape[2], shape[3]
	for b := 0; b < B; b++ {
		for c := 0; c < C; c++ {
			var sum T
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					sum += x[b*st[0]+c*st[1]+h*st[2]+w*st[3]]
				}
			}
			out[b*C+c] = sum / T(H*W)
		}
	}
}
