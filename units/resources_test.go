package units

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite golden files")

func p[T any](v T) *T { return &v }

// TestResourcePropertiesGolden pins, for a table of OCI resources, the
// exact systemd properties: names, D-Bus signatures and values.
func TestResourcePropertiesGolden(t *testing.T) {
	cases := []struct {
		name string
		r    *specs.LinuxResources
	}{
		{"none", nil},
		{"cpu shares 1024 (cpu = 100)", &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: p(uint64(1024))}}},
		{"cpu shares 2 (minimum weight)", &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: p(uint64(2))}}},
		{"cpu quota 150%", &specs.LinuxResources{CPU: &specs.LinuxCPU{Quota: p(int64(150000)), Period: p(uint64(100000))}}},
		{"cpuset 0-1,3 and mems 0", &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: "0-1,3", Mems: "0"}}},
		{"cpuset 9", &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: "9"}}},
		{"memory limit 32 MiB", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: p(int64(32 << 20))}}},
		{"memory 64 reserved, 128 max, 32 swap", &specs.LinuxResources{Memory: &specs.LinuxMemory{
			Limit: p(int64(128 << 20)), Reservation: p(int64(64 << 20)), Swap: p(int64(160 << 20))}}},
		{"pids 50", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: p(int64(50))}}},
		{"io weight 300", &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{Weight: p(uint16(300))}}},
		{"devices", &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
			{Allow: false, Access: "rwm"},
			{Allow: true, Type: "c", Major: p(int64(10)), Minor: p(int64(229)), Access: "rw"},
			{Allow: true, Type: "b", Major: p(int64(7)), Minor: p(int64(0))},
		}}},
	}
	var b strings.Builder
	for _, c := range cases {
		props, err := ResourceProperties(c.r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fmt.Fprintf(&b, "# %s\n", c.name)
		for _, pr := range props {
			fmt.Fprintf(&b, "%s %s = %s\n", pr.Name, pr.Value.Signature(), pr.Value.String())
		}
	}
	golden := filepath.Join("testdata", "resources.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("properties differ from %s:\n--- got\n%s--- want\n%s", golden, b.String(), want)
	}
}

func TestResourcePropertiesErrors(t *testing.T) {
	for _, r := range []*specs.LinuxResources{
		{CPU: &specs.LinuxCPU{Cpus: "3-1"}},
		{CPU: &specs.LinuxCPU{Cpus: "x"}},
		{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "c"}}},
		{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "p", Major: p(int64(1)), Minor: p(int64(1))}}},
	} {
		if _, err := ResourceProperties(r); err == nil {
			t.Errorf("%+v: want an error", r)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	props, _ := ResourceProperties(&specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: "0"}})
	if err := CheckVersion(243, props); err == nil || !strings.Contains(err.Error(), "AllowedCPUs needs systemd >= 244") {
		t.Fatalf("systemd 243: got %v", err)
	}
	if err := CheckVersion(252, props); err != nil {
		t.Fatal(err)
	}
}
