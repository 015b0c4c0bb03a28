package prealloc

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkAddSmallCNN is smallcnn's residual add (64x16x28x28 float32) in place over a.
func BenchmarkAddSmallCNN(b *testing.B) {
	g := G.NewGraph()
	shape := []int{64, 16, 28, 28}
	a, c := input(g, tensor.Float32, "a", shape...), input(g, tensor.Float32, "b", shape...)
	node := G.Must(G.Add(a, c))
	f, ok := For(node.Op())
	if !ok {
		b.Fatal("no Func for +")
	}
	x, y := filled(tensor.Float32, 1, shape...), filled(tensor.Float32, 2, shape...)
	ins := []G.Value{x, y}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f(x, ins...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcatSmallCNN is smallcnn's concat of two 64x16x14x14 float32 tensors along the
// channels.
func BenchmarkConcatSmallCNN(b *testing.B) {
	g := G.NewGraph()
	shape := []int{64, 16, 14, 14}
	a, c := input(g, tensor.Float32, "a", shape...), input(g, tensor.Float32, "b", shape...)
	node := G.Must(G.Concat(1, a, c))
	f, ok := For(node.Op())
	if !ok {
		b.Fatal("no Func for concat")
	}
	ins := []G.Value{filled(tensor.Float32, 1, shape...), filled(tensor.Float32, 2, shape...)}
	out := poisoned(tensor.Float32, 64, 32, 14, 14)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f(out, ins...); err != nil {
			b.Fatal(err)
		}
	}
}
