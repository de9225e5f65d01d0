package units

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ResourceProperties maps the OCI resource model, which every driver
// shares (the container driver included), to systemd unit properties with
// their exact D-Bus types. Accounting is switched on by the caller.
//
// CPU shares use systemd's own conversion (CPUShares 1024 = CPUWeight 100),
// a CFS quota becomes CPUQuotaPerSecUSec (+ CPUQuotaPeriodUSec), cpusets
// become AllowedCPUs/AllowedMemoryNodes bitmasks, memory limit/reservation
// MemoryMax/MemoryLow, OCI's memory+swap total MemorySwapMax, pids
// TasksMax, the block IO weight IOWeight, and a device list DevicePolicy=
// closed (the standard pseudo devices stay usable) plus DeviceAllow.
func ResourceProperties(r *specs.LinuxResources) ([]Property, error) {
	if r == nil {
		return nil, nil
	}
	var props []Property
	if c := r.CPU; c != nil {
		if c.Shares != nil {
			props = append(props, Uint64("CPUWeight", cpuWeight(*c.Shares)))
		}
		if c.Quota != nil && *c.Quota > 0 {
			period := uint64(100000)
			if c.Period != nil && *c.Period > 0 {
				period = *c.Period
			}
			props = append(props,
				Uint64("CPUQuotaPerSecUSec", uint64(*c.Quota)*1000000/period),
				Uint64("CPUQuotaPeriodUSec", period))
		}
		if c.Cpus != "" {
			mask, err := bitmask(c.Cpus)
			if err != nil {
				return nil, fmt.Errorf("cpus: %w", err)
			}
			props = append(props, prop("AllowedCPUs", mask))
		}
		if c.Mems != "" {
			mask, err := bitmask(c.Mems)
			if err != nil {
				return nil, fmt.Errorf("mems: %w", err)
			}
			props = append(props, prop("AllowedMemoryNodes", mask))
		}
	}
	if m := r.Memory; m != nil {
		if m.Limit != nil && *m.Limit > 0 {
			props = append(props, Uint64("MemoryMax", uint64(*m.Limit)))
			if m.Swap != nil && *m.Swap >= *m.Limit {
				props = append(props, Uint64("MemorySwapMax", uint64(*m.Swap-*m.Limit)))
			}
		}
		if m.Reservation != nil && *m.Reservation > 0 {
			props = append(props, Uint64("MemoryLow", uint64(*m.Reservation)))
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit > 0 {
		props = append(props, Uint64("TasksMax", uint64(*p.Limit)))
	}
	if b := r.BlockIO; b != nil && b.Weight != nil {
		props = append(props, Uint64("IOWeight", uint64(*b.Weight)))
	}
	if len(r.Devices) > 0 {
		allow, err := deviceAllow(r.Devices)
		if err != nil {
			return nil, err
		}
		props = append(props, String("DevicePolicy", "closed"), prop("DeviceAllow", allow))
	}
	return props, nil
}

// cpuWeight converts cgroup v1 CPU shares to systemd's CPUWeight.
func cpuWeight(shares uint64) uint64 {
	return min(max(shares*100/1024, 1), 10000)
}

// bitmask turns a list like "0-2,5" into systemd's CPU/NUMA bitmask:
// byte i bit j stands for CPU 8i+j.
func bitmask(list string) ([]byte, error) {
	var mask []byte
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad list %q", list)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad list %q", list)
			}
		}
		if b >= 8192 {
			return nil, fmt.Errorf("list %q goes beyond 8192", list)
		}
		for c := a; c <= b; c++ {
			for len(mask) <= c/8 {
				mask = append(mask, 0)
			}
			mask[c/8] |= 1 << (c % 8)
		}
	}
	return mask, nil
}

// deviceAccess is one DeviceAllow entry: D-Bus (ss).
type deviceAccess struct {
	Path   string
	Access string
}

// deviceAllow turns OCI device rules into DeviceAllow entries
// ("/dev/char/MAJ:MIN", access). Deny rules are what DevicePolicy=closed
// does already; wildcards are not supported.
func deviceAllow(devs []specs.LinuxDeviceCgroup) ([]deviceAccess, error) {
	var out []deviceAccess
	for _, d := range devs {
		if !d.Allow {
			continue
		}
		if d.Major == nil || d.Minor == nil || *d.Major < 0 || *d.Minor < 0 {
			return nil, fmt.Errorf("device rule %+v: name a device by major and minor number", d)
		}
		kind := map[string]string{"c": "char", "b": "block"}[d.Type]
		if kind == "" {
			return nil, fmt.Errorf("device rule type %q: want c or b", d.Type)
		}
		access := d.Access
		if access == "" {
			access = "rwm"
		}
		out = append(out, deviceAccess{Path: fmt.Sprintf("/dev/%s/%d:%d", kind, *d.Major, *d.Minor), Access: access})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// CheckVersion returns an error naming the first property that a manager
// of version v does not know; 0 means unknown and passes.
func CheckVersion(v int, props []Property) error { return checkVersion(v, props) }
