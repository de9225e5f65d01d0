package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/unitvisor/unitvisor/jobspec"
)

// Node is what this machine offers to tasks: memory and CPUs after the
// agent's configured reservation for the system.
type Node struct {
	MemoryMB int   // total minus reserved
	CPUs     []int // online CPUs
	Reserved []int // CPUs kept for the system: never handed out as cores
}

// DetectNode reads the machine's memory and online CPUs and subtracts the
// reservation (MiB of memory, number of CPUs taken from the end).
func DetectNode(reservedMB, reservedCores int) (Node, error) {
	mem, err := memTotalMB("/proc/meminfo")
	if err != nil {
		return Node{}, err
	}
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return Node{}, fmt.Errorf("read online CPUs: %w", err)
	}
	cpus := jobspec.CPUs(strings.TrimSpace(string(b)))
	n := Node{MemoryMB: max(mem-reservedMB, 0), CPUs: cpus}
	if reservedCores > 0 && reservedCores <= len(cpus) {
		n.Reserved = cpus[len(cpus)-reservedCores:]
	}
	return n, nil
}

func memTotalMB(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read memory size: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.Atoi(f[1])
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("read memory size: no MemTotal in %s", path)
}

// reservedMB is the memory a task's instances hold on the node: the
// reservation when memory_max is set, else the limit.
func reservedMB(t *jobspec.Task) int {
	if t.Resources == nil {
		return 0
	}
	return t.Resources.MemoryMB * t.Count
}

func jobMemoryMB(j *jobspec.Job) int {
	sum := 0
	for _, t := range j.Tasks {
		sum += reservedMB(t)
	}
	return sum
}

// freeCores returns the CPUs that may be handed out as dedicated cores
// and are not held by another instance.
func (n Node) freeCores(held map[int]bool) []int {
	var out []int
	for _, c := range n.CPUs {
		if !slices.Contains(n.Reserved, c) && !held[c] {
			out = append(out, c)
		}
	}
	return out
}

// cpuList renders CPU numbers as a cpuset ("2,3").
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
