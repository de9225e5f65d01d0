package drivers

import (
	"fmt"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/unitvisor/unitvisor/jobspec"
)

const mib = 1 << 20

// Resources turns a task's resources block into the OCI resource model
// that units maps to systemd properties (and that a container runtime
// would read). cpus is the cpuset to pin to: the task's own cpuset, or the
// CPUs the agent picked for its cores. Devices are looked up on this
// machine; a missing one is an error.
func Resources(r *jobspec.Resources, cpus string) (*specs.LinuxResources, error) {
	if r == nil {
		return nil, nil
	}
	out := &specs.LinuxResources{}
	if r.CPU > 0 || r.CPULimit > 0 || cpus != "" {
		out.CPU = &specs.LinuxCPU{Cpus: cpus}
		if r.CPU > 0 {
			// cpu 100 = 1024 shares = systemd's default CPUWeight 100.
			shares := uint64(r.CPU) * 1024 / 100
			out.CPU.Shares = &shares
		}
		if r.CPULimit > 0 {
			period := uint64(100000)
			quota := int64(r.CPULimit) * int64(period) / 100
			out.CPU.Quota, out.CPU.Period = &quota, &period
		}
	}
	if limit := r.MemoryLimitMB(); limit > 0 {
		l := int64(limit) * mib
		out.Memory = &specs.LinuxMemory{Limit: &l}
		if r.MemoryMaxMB > 0 {
			res := int64(r.MemoryMB) * mib
			out.Memory.Reservation = &res
		}
		if r.SwapMB > 0 {
			total := l + int64(r.SwapMB)*mib // OCI: memory + swap
			out.Memory.Swap = &total
		}
	}
	if r.Pids > 0 {
		out.Pids = &specs.LinuxPids{Limit: ptr(int64(r.Pids))}
	}
	if r.IOWeight > 0 {
		out.BlockIO = &specs.LinuxBlockIO{Weight: ptr(uint16(r.IOWeight))}
	}
	for _, entry := range r.Devices {
		path, access := jobspec.ParseDevice(entry)
		dev, err := Device(path)
		if err != nil {
			return nil, err
		}
		dev.Access = access
		out.Devices = append(out.Devices, dev)
	}
	return out, nil
}

// Device looks up a device node: its type and numbers.
func Device(path string) (specs.LinuxDeviceCgroup, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return specs.LinuxDeviceCgroup{}, fmt.Errorf("device %s: %w: list only devices this machine has", path, err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return specs.LinuxDeviceCgroup{}, fmt.Errorf("device %s: %w", path, os.ErrInvalid)
	}
	major, minor := int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
	return specs.LinuxDeviceCgroup{Allow: true, Type: typ, Major: &major, Minor: &minor}, nil
}

func ptr[T any](v T) *T { return &v }
