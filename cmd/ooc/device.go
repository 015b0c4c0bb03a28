package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm"
	_ "github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch" // -device cuda and cuda:N, computing with the CUDA kernels
)

// deviceHelp describes -device for the commands that run real steps.
const deviceHelp = "device: cpu, or cuda / cuda:N (the kernels of vm/cuda/kernels and cuBLAS; ooc doctor checks a GPU)"

// openDevice opens the device a -device flag names. A name no device answers to, or an
// unknown simulated profile, is a usage error; a device that exists by name but cannot be
// opened here (no NVIDIA driver, no GPU) is not: the command fails with the driver's words
// and exit code 1, at once, before any model or data is built.
func openDevice(spec string, capacity int64) (vm.Device, error) {
	d, err := vm.NewDevice(spec, capacity)
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, vm.ErrUnknownDevice) || strings.HasPrefix(spec, "sim:"):
		return nil, usagef("-device %s: %v", spec, err)
	}
	return nil, fmt.Errorf("-device %s: %w", spec, err)
}

// checkRunDevice checks the -device of a command that runs training steps for real. The
// CPU runs them, and so does a device with a backend that computes on it (CUDA, through
// vm/cuda/dispatch). Any other device is opened, so that a machine without its driver or
// hardware fails at once; a simulated device is refused, as it would run no real step.
func checkRunDevice(spec string) error {
	if spec == "cpu" || spec == "" {
		return nil
	}
	d, err := openDevice(spec, 0)
	if err != nil {
		return err
	}
	name, simulated := d.Name(), d.Simulated()
	_, computes := vm.BackendFor(d)
	if err := d.Close(); err != nil {
		return fmt.Errorf("-device %s: %w", spec, err)
	}
	switch {
	case simulated:
		return usagef("-device %s: this command runs real steps: use cpu (sweep, plan and compare take sim:PROFILE)", spec)
	case !computes:
		return fmt.Errorf("-device %s: %s opened, but no backend runs ops on it", spec, name)
	}
	return nil
}

// checkTrainDevices checks train's -device, which may also be a list of
// devices (cpu,cpu or cpu*2: data parallel), each as checkRunDevice does.
// train.Config.Check says what the list may hold.
func checkTrainDevices(spec string) error {
	for _, part := range strings.Split(spec, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), "*")
		if name != spec && strings.HasPrefix(name, "sim:") {
			return usagef("-device %s: train runs real steps; ooc multigpu simulates data-parallel steps on sim:PROFILE*N", spec)
		}
		if err := checkRunDevice(name); err != nil {
			return err
		}
	}
	return nil
}
