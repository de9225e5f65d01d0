package jobspec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Limits of the resources block.
const (
	maxCPUWeight = 10000   // systemd's CPUWeight range is 1-10000
	maxCPULimit  = 102400  // percent: 1024 CPUs
	maxCores     = 1024    // dedicated CPUs
	minMemoryMB  = 4       // below this nothing starts
	maxMemoryMB  = 1 << 24 // 16 TiB
	maxPids      = 4194304 // the kernel's pid_max limit
)

var resourcesSchema = attributeSchema("cpu", "cpu_limit", "cores", "cpuset",
	"memory", "memory_max", "swap", "pids", "io_weight", "devices")

var (
	cpuLimitRE = regexp.MustCompile(`^([0-9]+)%$`)
	cpusetRE   = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)
	deviceRE   = regexp.MustCompile(`^(/dev/[^\s]+)(\s+([rwm]{1,3}))?$`)
)

// decodeResources decodes a resources block; positions of its attributes
// go to pos as "resources.<name>".
func (d *decoder) decodeResources(block *hcl.Block, pos map[string]string) *Resources {
	r := &Resources{}
	attrs := d.content(block.Body, resourcesSchema, "resources").Attributes
	for name, a := range attrs {
		pos["resources."+name] = posString(a.Expr.Range())
	}
	ints := []struct {
		name   string
		dst    *int
		lo, hi int
	}{
		{"cpu", &r.CPU, 1, maxCPUWeight},
		{"cores", &r.Cores, 1, maxCores},
		{"memory", &r.MemoryMB, minMemoryMB, maxMemoryMB},
		{"memory_max", &r.MemoryMaxMB, minMemoryMB, maxMemoryMB},
		{"swap", &r.SwapMB, 0, maxMemoryMB},
		{"pids", &r.Pids, 1, maxPids},
		{"io_weight", &r.IOWeight, 1, maxCPUWeight},
	}
	for _, f := range ints {
		if a := attrs[f.name]; a != nil {
			if n, ok := d.intAttr(a, f.lo, f.hi); ok {
				*f.dst = n
			}
		}
	}
	if a := attrs["cpu_limit"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			n, err := parseCPULimit(s)
			if d.check(a.Expr.Range(), "Invalid cpu_limit", err) {
				r.CPULimit = n
			}
		}
	}
	if a := attrs["cpuset"]; a != nil {
		if s, ok := d.stringAttr(a); ok && d.check(a.Expr.Range(), "Invalid cpuset", checkCPUSet(s)) {
			r.CPUSet = s
		}
	}
	if a := attrs["devices"]; a != nil {
		r.Devices = d.decodeDevices(a)
	}
	if r.Cores > 0 && attrs["cpuset"] != nil {
		d.errorf(attrs["cpuset"].Expr.Range(), "Conflicting resources",
			"set either cores (the agent picks dedicated CPUs) or cpuset (you name them), not both")
	}
	if a := attrs["memory_max"]; a != nil && r.MemoryMaxMB > 0 && r.MemoryMaxMB < r.MemoryMB {
		d.errorf(a.Expr.Range(), "Invalid memory_max",
			"memory_max (%d MiB) is below memory (%d MiB): memory is the reservation and memory_max the hard limit; raise memory_max", r.MemoryMaxMB, r.MemoryMB)
	}
	if a := attrs["swap"]; a != nil && r.SwapMB > 0 && r.MemoryLimitMB() == 0 {
		d.errorf(a.Expr.Range(), "Invalid swap", "swap needs a memory limit: set memory (or memory_max) too")
	}
	return r
}

// parseCPULimit reads "150%" (1.5 CPUs) as 150.
func parseCPULimit(s string) (int, error) {
	m := cpuLimitRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf(`cpu_limit %q must be a percentage of one CPU, e.g. "50%%" or "150%%" (1.5 CPUs)`, s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > maxCPULimit {
		return 0, fmt.Errorf("cpu_limit %q must be between 1%% and %d%%", s, maxCPULimit)
	}
	return n, nil
}

// checkCPUSet validates a CPU list such as "0-3,6".
func checkCPUSet(s string) error {
	if !cpusetRE.MatchString(s) {
		return fmt.Errorf(`cpuset %q must list CPUs and ranges, e.g. "0-1,3"`, s)
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		if b < a || b >= maxCores {
			return fmt.Errorf("cpuset %q: range %q must go upward and stay below CPU %d", s, part, maxCores)
		}
	}
	return nil
}

// decodeDevices decodes the device allow list: "/dev/PATH" or
// "/dev/PATH ACCESS" with ACCESS made of r, w, m.
func (d *decoder) decodeDevices(a *hcl.Attribute) []string {
	val, ok := d.evalPlain(a)
	if !ok {
		return nil
	}
	if ty := val.Type(); !ty.IsTupleType() && !ty.IsListType() {
		d.errorf(a.Expr.Range(), "Invalid devices", `devices must be a list of strings, e.g. devices = ["/dev/fuse rw"]`)
		return nil
	}
	var out []string
	for i, elem := range val.AsValueSlice() {
		s, ok := d.toString(a.Expr, elem, fmt.Sprintf("devices[%d]", i))
		if !ok {
			continue
		}
		if !deviceRE.MatchString(strings.TrimSpace(s)) {
			d.errorf(a.Expr.Range(), "Invalid device",
				`devices[%d] = %q must be a device path under /dev, optionally followed by the access (r, w, m), e.g. "/dev/fuse rw"`, i, s)
			continue
		}
		out = append(out, strings.Join(strings.Fields(s), " "))
	}
	return out
}

// ParseDevice splits an entry of Resources.Devices into path and access
// (default "rwm").
func ParseDevice(entry string) (path, access string) {
	path, access, _ = strings.Cut(entry, " ")
	if access == "" {
		access = "rwm"
	}
	return path, access
}

// CPUs expands a cpuset such as "0-2,5" into CPU numbers.
func CPUs(cpuset string) []int {
	var out []int
	if cpuset == "" {
		return nil
	}
	for _, part := range strings.Split(cpuset, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
