package units

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is what a unit's cgroup has accounted. Zero fields were not
// available on this host (e.g. no memory peak before Linux 5.19 on v2).
type Usage struct {
	MemoryBytes      uint64 `json:"memory_bytes"`
	MemoryPeakBytes  uint64 `json:"memory_peak_bytes,omitempty"`
	MemoryLimitBytes uint64 `json:"memory_limit_bytes,omitempty"` // 0: unlimited
	CPUNanos         uint64 `json:"cpu_nanos"`
	Tasks            uint64 `json:"tasks"`
	OOMKills         uint64 `json:"oom_kills"` // kernel OOM kills inside the cgroup
}

// Cgroups reads accounting straight from cgroupfs, without a D-Bus call
// (systemd never signals MemoryCurrent, CPUUsageNSec or TasksCurrent, and
// reading them over D-Bus per unit on every scrape is what makes systemd
// exporters slow). It handles the unified (v2), hybrid and legacy (v1)
// layouts.
type Cgroups struct {
	Root string // normally /sys/fs/cgroup
}

// UnitCgroup is the cgroup path systemd gives a unit in a slice:
// "a-b.slice" nests as /a.slice/a-b.slice.
func UnitCgroup(slice, unit string) string {
	p := "/"
	name := strings.TrimSuffix(slice, ".slice")
	if name != "" && name != "-" {
		parts := strings.Split(name, "-")
		for i := range parts {
			p = filepath.Join(p, strings.Join(parts[:i+1], "-")+".slice")
		}
	}
	return filepath.Join(p, unit)
}

// Usage reads one unit's accounting; cgroup is the unit's path (see
// UnitCgroup). A unit whose cgroup is gone gives an error.
func (c Cgroups) Usage(cgroup string) (Usage, error) {
	var u Usage
	v2 := c.v2dir(cgroup)
	if v2 == "" {
		return u, fmt.Errorf("read usage of %s: no cgroup", cgroup)
	}
	if c.pureV2() {
		u.MemoryBytes = readUint(filepath.Join(v2, "memory.current"))
		u.MemoryPeakBytes = readUint(filepath.Join(v2, "memory.peak"))
		u.MemoryLimitBytes = readUint(filepath.Join(v2, "memory.max"))
		u.OOMKills = readKey(filepath.Join(v2, "memory.events"), "oom_kill")
		u.Tasks = readUint(filepath.Join(v2, "pids.current"))
	} else {
		mem := filepath.Join(c.Root, "memory", cgroup)
		u.MemoryBytes = readUint(filepath.Join(mem, "memory.usage_in_bytes"))
		u.MemoryPeakBytes = readUint(filepath.Join(mem, "memory.max_usage_in_bytes"))
		if l := readUint(filepath.Join(mem, "memory.limit_in_bytes")); l < 1<<62 {
			u.MemoryLimitBytes = l
		}
		u.OOMKills = readKey(filepath.Join(mem, "memory.oom_control"), "oom_kill")
		u.Tasks = readUint(filepath.Join(c.Root, "pids", cgroup, "pids.current"))
	}
	// cpu.stat's usage_usec is kept by every v2 cgroup, also in the hybrid
	// layout where v1 cpuacct is not set up for units.
	if us := readKey(filepath.Join(v2, "cpu.stat"), "usage_usec"); us > 0 {
		u.CPUNanos = us * 1000
	} else {
		u.CPUNanos = readUint(filepath.Join(c.Root, "cpuacct", cgroup, "cpuacct.usage"))
	}
	return u, nil
}

func (c Cgroups) pureV2() bool {
	_, err := os.Stat(filepath.Join(c.Root, "cgroup.controllers"))
	return err == nil
}

// v2dir is the unit's directory in the v2 tree ("" if it has none).
func (c Cgroups) v2dir(cgroup string) string {
	for _, d := range []string{filepath.Join(c.Root, cgroup), filepath.Join(c.Root, "unified", cgroup)} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			return d
		}
	}
	return ""
}

func readUint(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return v // "max" parses as 0: unlimited
}

// readKey reads "key value" lines (memory.events, cpu.stat, oom_control).
func readKey(path, key string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
