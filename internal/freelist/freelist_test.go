package freelist

import "testing"

func TestGetReturnsWhatPutKept(t *testing.T) {
	var l List[int]
	a := l.Get()
	if a == nil || *a != 0 || l.Len() != 0 {
		t.Fatalf("Get on an empty list = %v (len %d), want a new zero", a, l.Len())
	}
	b := new(int)
	*a, *b = 1, 2
	l.Put(a)
	l.Put(b)
	if got := l.Get(); got != b || *got != 2 {
		t.Errorf("Get = %p (%d), want the spare put last, %p, as it was left", got, *got, b)
	}
	if got := l.Get(); got != a {
		t.Errorf("second Get = %p, want %p", got, a)
	}
	if got := l.Get(); got == a || got == b || *got != 0 {
		t.Errorf("Get after the spares ran out = %p (%d), want a new zero", got, *got)
	}
}

func TestSteadyUseAllocatesNothing(t *testing.T) {
	var l List[[64]byte]
	l.Put(l.Get())
	if n := testing.AllocsPerRun(100, func() { l.Put(l.Get()) }); n != 0 {
		t.Errorf("a Get and Put of a kept spare allocates %.1f times, want 0", n)
	}
}
