// Package config reads the agent's HCL configuration file and fills in
// defaults. It knows the agent's settings, nothing about how they are used.
package config

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Agent is the agent's configuration.
type Agent struct {
	DataDir    string    `hcl:"data_dir,optional"`
	Socket     string    `hcl:"socket,optional"`
	LogLevel   string    `hcl:"log_level,optional"`
	UnitPrefix string    `hcl:"unit_prefix,optional"`
	Slice      string    `hcl:"slice,optional"`
	Ports      *Ports    `hcl:"ports,block"`
	Drivers    []Driver  `hcl:"driver,block"`
	Reserved   *Reserved `hcl:"reserved,block"`
	Metrics    *Metrics  `hcl:"metrics,block"`
	Consul     *Consul   `hcl:"consul,block"` // nil: no Consul bridge
}

// Metrics is the Prometheus endpoint (/metrics).
type Metrics struct {
	// Address is host:port to listen on; port 0 picks a free one.
	Address string `hcl:"address,optional"`
	// UsageInterval is how often tasks' cgroup accounting (memory, CPU,
	// tasks, OOM kills) is read; scrapes serve the last reading.
	UsageInterval string `hcl:"usage_interval,optional"`
}

// Usage returns UsageInterval as a duration.
func (m *Metrics) Usage() time.Duration {
	d, _ := time.ParseDuration(m.UsageInterval)
	return d
}

// Ports is the range dynamic ports are taken from.
type Ports struct {
	Min int `hcl:"min"`
	Max int `hcl:"max"`
}

// Reserved is kept for the system: tasks' memory reservations must fit in
// the rest, and dedicated cores are never taken from the reserved CPUs.
type Reserved struct {
	MemoryMB int `hcl:"memory,optional"` // MiB
	Cores    int `hcl:"cores,optional"`
}

// Driver switches one driver on or off.
type Driver struct {
	Name    string `hcl:"name,label"`
	Enabled bool   `hcl:"enabled"`
	// AllowedPaths are the host directories the driver may use: qemu
	// images, docker volumes and image tarballs must lie below one of them.
	AllowedPaths []string `hcl:"allowed_paths,optional"`
}

// Defaults.
const (
	DefaultDataDir = "/var/lib/unitvisor"
	DefaultSocket  = "/run/unitvisor/unitvisor.sock"
	DefaultPrefix  = "uv"
	DefaultSlice   = "unitvisor.slice"
	// DefaultMetricsAddress is on loopback: expose it on purpose. 17100 is
	// outside Prometheus's default port allocations (README, Metrics).
	DefaultMetricsAddress = "127.0.0.1:17100"
	DefaultUsageInterval  = "10s"
)

// KnownDrivers are the drivers this build has. All but raw_exec (no
// isolation) are on unless switched off; java, qemu and docker then
// refuse tasks on a machine where fingerprinting found no JVM, qemu or crun.
var KnownDrivers = []string{"exec", "raw_exec", "java", "qemu", "docker"}

// Default returns the configuration used without a file.
func Default() *Agent {
	a := &Agent{}
	a.fill()
	return a
}

// Load reads path; an empty path means the defaults.
func Load(path string) (*Agent, error) {
	if path == "" {
		return Default(), nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read agent config: %w", err)
	}
	return Parse(path, src)
}

// Parse reads a configuration from src.
func Parse(filename string, src []byte) (*Agent, error) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("agent config: %s", diags.Error())
	}
	a := &Agent{}
	if diags := gohcl.DecodeBody(f.Body, nil, a); diags.HasErrors() {
		return nil, fmt.Errorf("agent config: %s", diags.Error())
	}
	a.fill()
	if err := a.validate(filename); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) fill() {
	if a.DataDir == "" {
		a.DataDir = DefaultDataDir
	}
	if a.Socket == "" {
		a.Socket = DefaultSocket
	}
	if a.LogLevel == "" {
		a.LogLevel = "info"
	}
	if a.UnitPrefix == "" {
		a.UnitPrefix = DefaultPrefix
	}
	if a.Slice == "" {
		a.Slice = DefaultSlice
	}
	if a.Ports == nil {
		a.Ports = &Ports{Min: 20000, Max: 32000}
	}
	if a.Reserved == nil {
		a.Reserved = &Reserved{MemoryMB: 256}
	}
	if a.Metrics == nil {
		a.Metrics = &Metrics{}
	}
	if a.Metrics.Address == "" {
		a.Metrics.Address = DefaultMetricsAddress
	}
	if a.Metrics.UsageInterval == "" {
		a.Metrics.UsageInterval = DefaultUsageInterval
	}
	if a.Consul != nil {
		a.Consul.fill()
	}
}

func (a *Agent) validate(file string) error {
	var problems []string
	if !strings.HasPrefix(a.DataDir, "/") {
		problems = append(problems, fmt.Sprintf("data_dir %q: use an absolute path", a.DataDir))
	}
	if !strings.HasPrefix(a.Socket, "/") {
		problems = append(problems, fmt.Sprintf("socket %q: use an absolute path", a.Socket))
	}
	if _, err := a.Level(); err != nil {
		problems = append(problems, err.Error())
	}
	if !strings.HasSuffix(a.Slice, ".slice") {
		problems = append(problems, fmt.Sprintf("slice %q: a slice name ends in .slice", a.Slice))
	}
	if a.Ports.Min < 1024 || a.Ports.Max > 65535 || a.Ports.Min > a.Ports.Max {
		problems = append(problems, fmt.Sprintf("ports %d-%d: want 1024 <= min <= max <= 65535", a.Ports.Min, a.Ports.Max))
	}
	if a.Reserved.MemoryMB < 0 || a.Reserved.Cores < 0 {
		problems = append(problems, "reserved: memory and cores must not be negative")
	}
	if _, port, err := net.SplitHostPort(a.Metrics.Address); err != nil {
		problems = append(problems, fmt.Sprintf("metrics address %q: want host:port, e.g. %q", a.Metrics.Address, DefaultMetricsAddress))
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		problems = append(problems, fmt.Sprintf("metrics address %q: the port must be a number from 0 to 65535", a.Metrics.Address))
	}
	if d, err := time.ParseDuration(a.Metrics.UsageInterval); err != nil || d < time.Second {
		problems = append(problems, fmt.Sprintf("metrics usage_interval %q: want a duration of at least 1s, e.g. %q", a.Metrics.UsageInterval, DefaultUsageInterval))
	}
	for _, d := range a.Drivers {
		if !known(d.Name) {
			problems = append(problems, fmt.Sprintf("driver %q: unknown; known drivers: %s", d.Name, strings.Join(KnownDrivers, ", ")))
		}
	}
	problems = append(problems, a.Consul.problems()...)
	if len(problems) > 0 {
		return fmt.Errorf("agent config %s:\n  %s", file, strings.Join(problems, "\n  "))
	}
	return nil
}

func known(name string) bool {
	for _, k := range KnownDrivers {
		if k == name {
			return true
		}
	}
	return false
}

// DriverEnabled reports whether a driver is switched on.
func (a *Agent) DriverEnabled(name string) bool {
	for _, d := range a.Drivers {
		if d.Name == name {
			return d.Enabled
		}
	}
	return name != "raw_exec"
}

// AllowedPaths returns a driver's allowed host directories; qemu's default
// to <data_dir>/images.
func (a *Agent) AllowedPaths(name string) []string {
	for _, d := range a.Drivers {
		if d.Name == name && len(d.AllowedPaths) > 0 {
			return d.AllowedPaths
		}
	}
	if name == "qemu" {
		return []string{filepath.Join(a.DataDir, "images")}
	}
	return nil
}

// Level parses log_level.
func (a *Agent) Level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(a.LogLevel)); err != nil {
		return l, fmt.Errorf("log_level %q: use debug, info, warn or error", a.LogLevel)
	}
	return l, nil
}
