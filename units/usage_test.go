package units

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnitCgroup(t *testing.T) {
	for slice, want := range map[string]string{
		"unitvisor.slice": "/unitvisor.slice/u.service",
		"a-b.slice":       "/a.slice/a-b.slice/u.service",
		"-.slice":         "/u.service",
	} {
		if got := UnitCgroup(slice, "u.service"); got != want {
			t.Errorf("%s: got %s want %s", slice, got, want)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUsageHybrid(t *testing.T) {
	root := t.TempDir()
	cg := "/unitvisor.slice/u.service"
	write(t, root+"/memory"+cg+"/memory.usage_in_bytes", "1000\n")
	write(t, root+"/memory"+cg+"/memory.max_usage_in_bytes", "2000\n")
	write(t, root+"/memory"+cg+"/memory.limit_in_bytes", "9223372036854771712\n")
	write(t, root+"/memory"+cg+"/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	write(t, root+"/pids"+cg+"/pids.current", "3\n")
	write(t, root+"/unified"+cg+"/cgroup.procs", "")
	write(t, root+"/unified"+cg+"/cpu.stat", "usage_usec 1500\nuser_usec 1000\n")
	u, err := Cgroups{Root: root}.Usage(cg)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{MemoryBytes: 1000, MemoryPeakBytes: 2000, CPUNanos: 1500000, Tasks: 3, OOMKills: 2}
	if u != want {
		t.Fatalf("got %+v want %+v", u, want)
	}
}

func TestUsageV2(t *testing.T) {
	root := t.TempDir()
	cg := "/unitvisor.slice/u.service"
	write(t, root+"/cgroup.controllers", "cpu memory pids\n")
	write(t, root+cg+"/cgroup.procs", "")
	write(t, root+cg+"/memory.current", "100\n")
	write(t, root+cg+"/memory.peak", "300\n")
	write(t, root+cg+"/memory.max", "33554432\n")
	write(t, root+cg+"/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
	write(t, root+cg+"/pids.current", "1\n")
	write(t, root+cg+"/cpu.stat", "usage_usec 7\n")
	u, err := Cgroups{Root: root}.Usage(cg)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{MemoryBytes: 100, MemoryPeakBytes: 300, MemoryLimitBytes: 32 << 20, CPUNanos: 7000, Tasks: 1, OOMKills: 1}
	if u != want {
		t.Fatalf("got %+v want %+v", u, want)
	}
	if _, err := (Cgroups{Root: root}).Usage("/gone.service"); err == nil {
		t.Fatal("usage of a missing cgroup: want an error")
	}
}
