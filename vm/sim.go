package vm

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Profile describes a simulated device: its memory, a roofline for its
// compute, and its link to host memory. Every number printed from a
// simulation is labelled with the profile's name.
type Profile struct {
	Name     string
	Capacity int64 // device memory, bytes
	// Granularity is the unit of physical mapping of the device memory, bytes
	// (0: alloc.Granularity, CUDA's 2 MiB). alloc.HostGranularity() makes the
	// device map memory as the CPU device does.
	Granularity int64
	// PeakFLOPS is the FP32 peak and MemBandwidth the device-memory
	// bandwidth (bytes/s): the two roofs of the roofline.
	PeakFLOPS, MemBandwidth float64
	// Efficiency scales both roofs: the one calibrated constant (see
	// CalibrationNote).
	Efficiency float64
	// LinkBandwidth is the host link, bytes/s in each direction; each
	// direction has its own copy engine.
	LinkBandwidth float64
	// DevicesPerSwitch is how many devices share one host link when
	// several are made together (NewSimGroup, NewDevices "sim:P*4"), and
	// SwitchBandwidth what that link carries each way in all (0: the
	// LinkBandwidth of one). 0 devices: every device has its own link.
	DevicesPerSwitch int
	SwitchBandwidth  float64
	// Launch is the fixed cost of every op (kernel launch, framework).
	Launch time.Duration
	// Source says where the numbers come from.
	Source string
	// Measured holds per-op times recorded on a real device (see
	// Machine.OpTimes), keyed by OpKey; ops missing from it fall back to the
	// roofline.
	Measured map[string]float64
}

// CalibrationNote records how Efficiency was set, once for all profiles:
// it is the one value for which the simulated in-core ResNet-50 (224x224,
// batch 128, float32, SGD with momentum, 10 µs per op) trains at 492
// images/s on v100-nvlink, the Sony paper's in-core figure (Table 1). It is
// above 1 because the roofline counts naive work: 2mnk FLOPs for every
// convolution (cuDNN's Winograd 3x3 kernels do fewer) and unfused
// memory traffic for batch-norm and ReLU. It is never tuned per batch,
// model or scheduler; TestCalibration in package sweep re-derives it.
const CalibrationNote = "efficiency 1.174 calibrated once: in-core ResNet-50 at 224x224, batch 128, on v100-nvlink = 492 images/s (Sony paper, Table 1)"

// Efficiency is the calibrated roofline factor (see CalibrationNote).
const Efficiency = 1.174

var profiles = map[string]Profile{
	// Sony's out-of-core paper: Tesla V100-SXM2 16 GB on a host linked by
	// NVLink 2.0 (50 GB/s each way as the issue states). 15.7 TFLOP/s FP32,
	// 900 GB/s HBM2 (NVIDIA V100 datasheet).
	"v100-nvlink": {Capacity: 16 << 30, PeakFLOPS: 15.7e12, MemBandwidth: 900e9, LinkBandwidth: 50e9,
		Source: "V100-SXM2 16 GB datasheet; NVLink host link 50 GB/s (Sony out-of-core paper)"},
	// The offloading paper (Inria) measured 12.2 GB/s over PCIe on a V100.
	// V100-PCIe: 14 TFLOP/s FP32, 900 GB/s.
	"v100-pcie": {Capacity: 16 << 30, PeakFLOPS: 14e12, MemBandwidth: 900e9, LinkBandwidth: 12.2e9,
		Source: "V100-PCIe 16 GB datasheet; 12.2 GB/s measured PCIe bandwidth (Inria offloading paper)"},
	// Tesla P100-PCIe 16 GB: 9.3 TFLOP/s FP32, 732 GB/s; PCIe 3.0 x16 at
	// the same 12.2 GB/s effective.
	"p100-pcie": {Capacity: 16 << 30, PeakFLOPS: 9.3e12, MemBandwidth: 732e9, LinkBandwidth: 12.2e9,
		Source: "P100-PCIe 16 GB datasheet; PCIe 3.0 x16 at 12.2 GB/s effective"},
	// Titan Xp: 12 GB GDDR5X, 12.1 TFLOP/s FP32, 547.6 GB/s; PCIe 3.0.
	"titanxp-pcie": {Capacity: 12 << 30, PeakFLOPS: 12.1e12, MemBandwidth: 547.6e9, LinkBandwidth: 12.2e9,
		Source: "NVIDIA Titan Xp specifications; PCIe 3.0 x16 at 12.2 GB/s effective"},
	// The multi-GPU paper's machines (Kim et al., seed 002). Table I: one
	// Titan Xp 12 GB (figures above). For several: Titan Xps behind one
	// PCIe 3.0 switch whose x16 upstream port (12.2 GB/s effective, as for
	// one device) all four share; this switch topology is assumed (the
	// paper gives it only for its P100 server).
	"titanxp-switch": {Capacity: 12 << 30, PeakFLOPS: 12.1e12, MemBandwidth: 547.6e9, LinkBandwidth: 12.2e9,
		DevicesPerSwitch: 4, SwitchBandwidth: 12.2e9,
		Source: "NVIDIA Titan Xp specifications; PCIe 3.0 x16 at 12.2 GB/s effective per device; 4 devices share one switch uplink of 12.2 GB/s (assumed topology)"},
	// Tables II and III: four Tesla P100 16 GB on two PCIe switches, two
	// GPUs each (the paper's section IV.B), each switch's x16 uplink
	// shared by its two.
	"p100-2switch": {Capacity: 16 << 30, PeakFLOPS: 9.3e12, MemBandwidth: 732e9, LinkBandwidth: 12.2e9,
		DevicesPerSwitch: 2, SwitchBandwidth: 12.2e9,
		Source: "P100-PCIe 16 GB datasheet; two GPUs per PCIe 3.0 switch as in the multi-GPU paper's section IV.B, uplink 12.2 GB/s effective"},
	// GeForce GTX 1080 Ti, the DQN paper's GPU (NUS, seed 001): 11 GB
	// GDDR5X (11264 MiB), 484 GB/s, 3584 CUDA cores at 1582 MHz boost =
	// 11.34 TFLOP/s FP32 (NVIDIA GeForce GTX 1080 Ti specifications);
	// PCIe 3.0 x16 (15.75 GB/s raw) at about 12 GB/s effective, as the
	// other PCIe 3.0 profiles.
	"gtx1080ti": {Capacity: 11 << 30, PeakFLOPS: 11.34e12, MemBandwidth: 484e9, LinkBandwidth: 12e9,
		Source: "NVIDIA GeForce GTX 1080 Ti specifications (11 GB GDDR5X, 484 GB/s, 3584 cores at 1582 MHz); PCIe 3.0 x16 at about 12 GB/s effective"},
	// H100-PCIe 80 GB: 51.2 TFLOP/s FP32, 2.0 TB/s HBM2e; PCIe 5.0 x16 at
	// about 50 GB/s effective.
	"h100-pcie": {Capacity: 80 << 30, PeakFLOPS: 51.2e12, MemBandwidth: 2.0e12, LinkBandwidth: 50e9,
		Source: "H100-PCIe 80 GB datasheet; PCIe 5.0 x16 at about 50 GB/s effective"},
}

// ProfileNames lists the named profiles.
func ProfileNames() []string {
	var out []string
	for n := range profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupProfile returns a named profile, or for "measured:FILE" one whose op
// times come from a file written by WriteOpTimes (its memory and link are
// those of the CPU device it was recorded on, unless the file says otherwise).
func LookupProfile(name string) (Profile, error) {
	if file, ok := strings.CutPrefix(name, "measured:"); ok {
		return loadMeasured(file)
	}
	p, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("vm: unknown device profile %q (known: %s, measured:FILE)", name, strings.Join(ProfileNames(), ", "))
	}
	p.Name = name
	p.Efficiency = Efficiency
	p.Launch = 10 * time.Microsecond
	return p, nil
}

// measuredFile is the on-disk form of a measured profile.
type measuredFile struct {
	Machine       string             `json:"machine"`
	Capacity      int64              `json:"capacity"`
	LinkBandwidth float64            `json:"link_bandwidth"`
	PeakFLOPS     float64            `json:"peak_flops"`
	MemBandwidth  float64            `json:"mem_bandwidth"`
	Ops           map[string]float64 `json:"ops"`
}

func loadMeasured(file string) (Profile, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return Profile{}, fmt.Errorf("vm: measured profile: %w", err)
	}
	var mf measuredFile
	if err := json.Unmarshal(raw, &mf); err != nil {
		return Profile{}, fmt.Errorf("vm: measured profile %s: %w", file, err)
	}
	if len(mf.Ops) == 0 || mf.Capacity <= 0 || mf.LinkBandwidth <= 0 {
		return Profile{}, fmt.Errorf("vm: measured profile %s: needs ops, capacity and link_bandwidth", file)
	}
	p := Profile{
		Name: "measured:" + file, Capacity: mf.Capacity, LinkBandwidth: mf.LinkBandwidth,
		PeakFLOPS: mf.PeakFLOPS, Efficiency: 1, MemBandwidth: mf.MemBandwidth,
		Source: "per-op times measured on " + mf.Machine, Measured: mf.Ops,
	}
	// Ops missing from the file fall back to the roofline; without measured
	// roofs, use those of the CPU device on the project's 2-core machine
	// (GORGONIA-NOTES: ~10 GFLOP/s in convolutions) and a few GB/s of memory
	// bandwidth, and say so in the source.
	if p.PeakFLOPS <= 0 || p.MemBandwidth <= 0 {
		p.Source += " (roofline for unmeasured ops: assumed 10 GFLOP/s, 5 GB/s)"
	}
	if p.PeakFLOPS <= 0 {
		p.PeakFLOPS = 1e10
	}
	if p.MemBandwidth <= 0 {
		p.MemBandwidth = 5e9
	}
	return p, nil
}

// WriteOpTimes saves per-op times measured on a real device as a profile
// that LookupProfile("measured:FILE") reads back.
func WriteOpTimes(file, machine string, capacity int64, linkBandwidth float64, ops map[string]time.Duration) error {
	mf := measuredFile{Machine: machine, Capacity: capacity, LinkBandwidth: linkBandwidth, Ops: map[string]float64{}}
	for k, d := range ops {
		mf.Ops[k] = d.Seconds()
	}
	raw, err := json.MarshalIndent(mf, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, raw, 0o644)
}

// Sim is a simulated device: accounting-only memory of the profile's
// capacity, and times from the profile. A Machine on it runs the same tape
// through the same allocator code as on a real device, against a virtual
// clock with one compute stream and two copy engines.
type Sim struct {
	prof Profile
	mem  alloc.Memory
	sw   *hostSwitch // the link shared with other devices, if any
	link linkState
}

// NewSim makes a simulated device.
func NewSim(p Profile) (*Sim, error) {
	if p.Capacity <= 0 || p.PeakFLOPS <= 0 || p.MemBandwidth <= 0 || p.LinkBandwidth <= 0 {
		return nil, fmt.Errorf("vm: profile %q needs a positive capacity, peak FLOP/s, memory and link bandwidth", p.Name)
	}
	if p.Efficiency <= 0 {
		p.Efficiency = 1
	}
	if p.Granularity == 0 {
		p.Granularity = alloc.Granularity
	}
	mem, err := alloc.NewGranularAccountingMemory(p.Capacity, p.Granularity)
	if err != nil {
		return nil, fmt.Errorf("vm: profile %q: %w", p.Name, err)
	}
	return &Sim{prof: p, mem: mem}, nil
}

// Name implements Device.
func (s *Sim) Name() string { return "sim:" + s.prof.Name }

// Memory implements Device.
func (s *Sim) Memory() alloc.Memory { return s.mem }

// Capacity implements Device.
func (s *Sim) Capacity() int64 { return s.prof.Capacity }

// Simulated implements Device.
func (s *Sim) Simulated() bool { return true }

// Close implements Device.
func (s *Sim) Close() error { return s.mem.Close() }

// Profile returns the device's profile.
func (s *Sim) Profile() Profile { return s.prof }

// CopyTime is how long one copy engine takes to move n bytes.
func (s *Sim) CopyTime(n int64) time.Duration {
	return seconds(float64(n) / s.prof.LinkBandwidth)
}

// OpTime is the modelled time of one function: a measured time if the
// profile has one, else the roofline max(FLOPs / achieved FLOP/s, bytes /
// achieved bandwidth) plus the launch overhead.
func (s *Sim) OpTime(p *Program, f *Func) time.Duration {
	if s.prof.Measured != nil {
		if t, ok := s.prof.Measured[OpKey(p, f)]; ok {
			return seconds(t)
		}
	}
	flops, bytes := OpCost(p, f)
	compute := float64(flops) / (s.prof.PeakFLOPS * s.prof.Efficiency)
	memory := float64(bytes) / (s.prof.MemBandwidth * s.prof.Efficiency)
	return seconds(math.Max(compute, memory)) + s.prof.Launch
}

// UpdateTime is the modelled time of the optimizer's update of one
// learnable of n bytes: SGD with momentum reads the weight, its gradient
// and its momentum and writes two of them back, a memory-bound kernel.
func (s *Sim) UpdateTime(n int64) time.Duration {
	return seconds(float64(5*n)/(s.prof.MemBandwidth*s.prof.Efficiency)) + s.prof.Launch
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// FLOPser is implemented by ops that know their floating-point work.
type FLOPser interface {
	FLOPs(inputs []tensor.Shape) int64
}

// OpCost estimates a function's floating-point operations and the bytes it
// moves through device memory (operands read, result written). Ops that implement FLOPser say their own FLOPs;
// gorgonia's matrix products count 2mnk; everything else one per output
// element.
func OpCost(p *Program, f *Func) (flops, bytes int64) {
	out := &p.Vars[f.Output]
	shapes := make([]tensor.Shape, len(f.Inputs))
	for i, v := range f.Operands() {
		shapes[i] = p.Vars[v].Shape
		bytes += p.Vars[v].Bytes
	}
	// Workspace is left out: GPU convolutions (implicit GEMM) do not stream
	// an im2col buffer through device memory.
	bytes += out.Bytes
	elems := int64(out.Shape.TotalSize())
	if out.Node.IsScalar() {
		elems = 1
	}
	switch op := f.Op.(type) {
	case FLOPser:
		flops = op.FLOPs(shapes)
	default:
		flops = elems
		if len(shapes) == 2 && strings.Contains(f.Op.String(), "×") && len(out.Shape) > 0 && out.Shape[0] > 0 {
			k := int64(shapes[0].TotalSize()) / int64(out.Shape[0])
			flops = 2 * elems * k
		}
	}
	return flops, bytes
}

// OpKey identifies a function for measured profiles: its op and operand shapes.
func OpKey(p *Program, f *Func) string {
	var b strings.Builder
	b.WriteString(f.Op.String())
	for _, v := range f.Operands() {
		fmt.Fprintf(&b, " %v", p.Vars[v].Shape)
	}
	return b.String()
}
