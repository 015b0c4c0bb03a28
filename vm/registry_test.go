package vm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestRegisterDevice registers a device name and opens it through NewDevice, which hands
// the opener the whole name and the capacity.
func TestRegisterDevice(t *testing.T) {
	var got []string
	vm.RegisterDevice("testdev", func(spec string, capacity int64) (vm.Device, error) {
		got = append(got, spec)
		return vm.NewCPU(capacity)
	})
	for _, spec := range []string{"testdev", "testdev:3"} {
		d, err := vm.NewDevice(spec, 64<<20)
		if err != nil {
			t.Fatalf("NewDevice(%q): %v", spec, err)
		}
		if d.Capacity() != 64<<20 {
			t.Errorf("NewDevice(%q): capacity %d", spec, d.Capacity())
		}
		d.Close()
	}
	if strings.Join(got, ",") != "testdev,testdev:3" {
		t.Errorf("the opener got %q", got)
	}
	_, err := vm.NewDevice("nodev:1", 0)
	if !errors.Is(err, vm.ErrUnknownDevice) || !strings.Contains(err.Error(), "testdev, testdev:N") {
		t.Errorf("NewDevice(nodev:1): %v, want ErrUnknownDevice listing testdev", err)
	}
	for _, prefix := range []string{"testdev", "cpu", "sim", "", "a:b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterDevice(%q) did not panic", prefix)
				}
			}()
			vm.RegisterDevice(prefix, func(string, int64) (vm.Device, error) { return nil, nil })
		}()
	}
}
