package kernels_test

import (
	"math"
	"math/rand"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// hostMath are the host build's exp and log (what its kernels compute), the
// portable ports the PTX runs, and the FMA choice of the host's exp.
type hostMath struct {
	exp, log, expPortable, logPortable func(float64) float64
	expFMA                             func() int32
}

var (
	mathOnce sync.Once
	hm       hostMath
	hmErr    error
)

func loadHostMath(t *testing.T) hostMath {
	t.Helper()
	path := kernelstest.BuildHost(t)
	mathOnce.Do(func() {
		runtime.LockOSThread() // purego reads dlerror in a second call
		defer runtime.UnlockOSThread()
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			hmErr = err
			return
		}
		for name, fn := range map[string]any{"ooc_host_exp": &hm.exp, "ooc_host_log": &hm.log,
			"ooc_host_exp_portable": &hm.expPortable, "ooc_host_log_portable": &hm.logPortable,
			"ooc_host_exp_fma": &hm.expFMA} {
			if _, err := purego.Dlsym(h, name); err != nil {
				hmErr = err
				return
			}
			purego.RegisterLibFunc(fn, h, name)
		}
	})
	if hmErr != nil {
		t.Fatalf("loading the host build's math: %v", hmErr)
	}
	return hm
}

// mathInputs are the edge cases of exp and log and 1e5 random values: half
// uniform over exp's finite range (log: over (0, 1000)), half random bit
// patterns (every exponent, subnormals, NaNs with payloads).
func mathInputs() []float64 {
	f := math.Float64frombits
	xs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), f(0x7ff0000000000123), f(0xfff8000000000000),
		1, -1, 2, 0.5, math.Ln2, -math.Ln2, 1e-300, -1e-300, 1e-9, 3.7e-9, -3.7e-9, 1e300, -1e300, -1e10, 1e10,
		math.SmallestNonzeroFloat64, 3 * math.SmallestNonzeroFloat64, f(0x000fffffffffffff), 1e-310, 0x1p-1022, -0x1p-1022,
		math.MaxFloat64, -math.MaxFloat64,
		// exp: overflow (exp_amd64.s's 7.09782712893384e+02), where 2^k leaves
		// the normals (-708.4) and where the result underflows (-745.13)
		7.09782712893384e+02, math.Nextafter(7.09782712893384e+02, 1000), math.Nextafter(7.09782712893384e+02, 0),
		709.7, 709.8, -708.39641853226408, -708.4, -708.3, -744.44, -745.13321910194110842, -745.1332191019412, -745.2, -746, -1075 * math.Ln2,
		// log: √2/2, where log_amd64.s doubles the fraction, and √2
		math.Sqrt2 / 2, math.Nextafter(math.Sqrt2/2, 1), math.Nextafter(math.Sqrt2/2, 0), math.Sqrt2, math.Nextafter(math.Sqrt2, 2)}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 50000; i++ {
		xs = append(xs, (rng.Float64()*2-1)*746, f(rng.Uint64()))
		if i%2 == 0 {
			xs = append(xs, rng.Float64()*1000)
		}
	}
	return xs
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func normal(x float64) bool { a := math.Abs(x); return a >= 0x1p-1022 && a <= math.MaxFloat64 }

// ulps is how many float64s lie between a and b (both finite, same sign).
func ulps(a, b float64) uint64 {
	x, y := math.Float64bits(a), math.Float64bits(b)
	if x > y {
		return x - y
	}
	return y - x
}

// TestHostMathIsGos: on amd64 the host build's exp and log are Go's
// math.Exp and math.Log bit for bit (hostmath.h ports their assembly, with Go's
// run-time FMA choice), so the fake device computes what the CPU device does;
// the portable ports the PTX runs are within 2 ulps (exp) and 1 (log) of
// them wherever Go's are accurate (log_amd64.s does not normalise subnormals: Log(5e-324) is -709.09
// there, -744.44 in truth, and the portable port is right). The test runs
// again in a child with GODEBUG=cpu.fma=off, which Go's math follows, so both
// of exp's branches are checked on a machine with FMA.
func TestHostMathIsGos(t *testing.T) {
	m := loadHostMath(t)
	fma := m.expFMA()
	if runtime.GOARCH != "amd64" {
		if fma != -1 {
			t.Fatalf("on %s the host build claims Go's amd64 math (fma %d)", runtime.GOARCH, fma)
		}
		t.Skipf("on %s the host build runs the portable exp and log (Go's amd64 assembly is what it reproduces)", runtime.GOARCH)
	}
	t.Logf("host exp with FMA: %d (GODEBUG=%q)", fma, os.Getenv("GODEBUG"))
	var worstExp, worstLog uint64
	for _, x := range mathInputs() {
		if got, want := m.exp(x), math.Exp(x); !sameFloat(got, want) {
			t.Fatalf("exp(%v = %#x): host %v (%#x), Go %v (%#x)", x, math.Float64bits(x), got, math.Float64bits(got), want, math.Float64bits(want))
		}
		if got, want := m.log(x), math.Log(x); !sameFloat(got, want) {
			t.Fatalf("log(%v = %#x): host %v (%#x), Go %v (%#x)", x, math.Float64bits(x), got, math.Float64bits(got), want, math.Float64bits(want))
		}
		// The portable ports: special values alike; elsewhere within 2 ulps
		// where both results are normal (exp_amd64.s overflows at
		// 7.09782712893384e+02, a little before the true threshold).
		for _, c := range []struct{ p, g float64 }{{m.expPortable(x), math.Exp(x)}, {m.logPortable(x), math.Log(x)}} {
			if math.IsNaN(c.p) != math.IsNaN(c.g) {
				t.Fatalf("portable port of %v: %v, Go %v", x, c.p, c.g)
			}
		}
		if math.IsInf(x, 0) || x == 0 {
			if !sameFloat(m.expPortable(x), math.Exp(x)) || !sameFloat(m.logPortable(x), math.Log(x)) {
				t.Fatalf("portable exp, log of %v: %v, %v; Go %v, %v", x, m.expPortable(x), m.logPortable(x), math.Exp(x), math.Log(x))
			}
		}
		if e, g := m.expPortable(x), math.Exp(x); normal(e) && normal(g) {
			worstExp = max(worstExp, ulps(e, g))
		}
		if l, g := m.logPortable(x), math.Log(x); x >= 0x1p-1022 && normal(l) && normal(g) {
			worstLog = max(worstLog, ulps(l, g))
		}
	}
	t.Logf("portable ports against Go's amd64 math: exp within %d ulp, log within %d ulp", worstExp, worstLog)
	if worstExp > 2 || worstLog > 1 {
		t.Errorf("the portable ports are %d (exp) and %d (log) ulps from Go's; within 2 and 1 expected", worstExp, worstLog)
	}
	if os.Getenv("OOC_MATH_CHILD") != "" || fma == 0 {
		return // the child, or no FMA to turn off
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostMathIsGos$", "-test.v")
	cmd.Env = append(os.Environ(), "OOC_MATH_CHILD=1", "GODEBUG=cpu.fma=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with GODEBUG=cpu.fma=off: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "host exp with FMA: 0") {
		t.Fatalf("with GODEBUG=cpu.fma=off the host exp did not drop FMA:\n%s", out)
	}
}
