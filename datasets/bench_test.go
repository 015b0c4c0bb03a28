package datasets

import "testing"

// The loader must stay well ahead of a CPU training step; these report
// examples per second for the common shapes.

func benchLoader(b *testing.B, ds Dataset, o Options) {
	l, err := NewLoader(ds, o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*o.BatchSize)/b.Elapsed().Seconds(), "examples/s")
}

func BenchmarkLoaderSynthetic32(b *testing.B) {
	ds, _ := Synthetic(SyntheticConfig{Examples: 1024, Channels: 3, Height: 32, Width: 32, Classes: 10})
	benchLoader(b, ds, Options{BatchSize: 64, Shuffle: true, RandomCrop: 4, Flip: true, Mean: []float64{0.5}, Std: []float64{0.25}})
}

func BenchmarkLoaderFashionMNISTTo3x32(b *testing.B) {
	ds, err := FashionMNIST("", Test)
	if err != nil {
		b.Skipf("%v", err)
	}
	i := ds.Info()
	benchLoader(b, ds, Options{BatchSize: 128, Channels: 3, Height: 32, Width: 32, Shuffle: true, Mean: i.Mean, Std: i.Std})
}
