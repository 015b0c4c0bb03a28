package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// The device names "cuda" (cuda:0) and "cuda:N" open through vm.NewDevice, hence through
// -device in every command of cmd/ooc, once this package is linked in.
func init() { vm.RegisterDevice("cuda", openSpec) }

// openSpec opens a device from its command-line name, with a capacity in bytes (0: the
// free memory minus the reserve).
func openSpec(spec string, capacity int64) (vm.Device, error) {
	ordinal, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	d, err := Open(ordinal, WithCapacity(capacity))
	if err != nil {
		return nil, err
	}
	return d, nil
}

// ParseSpec reads a device name: "cuda" is ordinal 0, "cuda:N" ordinal N.
func ParseSpec(spec string) (int, error) {
	if spec == "cuda" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(spec, "cuda:")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 0 || rest != strconv.Itoa(n) {
		return 0, fmt.Errorf("cuda: device name %q: want cuda or cuda:N, N a device ordinal (0, 1, ...)", spec)
	}
	return n, nil
}
