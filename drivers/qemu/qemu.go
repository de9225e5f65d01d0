// Package qemu is the "qemu" driver: a virtual machine from a disk image
// under the directories the agent allows, run by qemu-system-x86_64 as the
// unit's main process. Guest memory comes from resources.memory, vCPUs from
// resources.cores; port_map forwards the task's host ports to guest ports
// (tcp and udp). With graceful_shutdown the unit's ExecStop sends
// system_powerdown over QMP and systemd sends SIGKILL after kill_timeout.
package qemu

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// Binary is the emulator this driver runs.
const Binary = "qemu-system-x86_64"

// Defaults when the task's resources say nothing.
const (
	defaultMemoryMB = 512
	// overheadMB is added to the unit's memory limit on top of the guest's
	// RAM: qemu itself needs memory beyond what it gives the guest.
	overheadMB = 64
)

// Info is what fingerprinting found.
type Info struct {
	Path         string   `json:"path"`
	Version      string   `json:"version"`
	Accelerators []string `json:"accelerators"` // "kvm" only when /dev/kvm can be opened
}

var versionRE = regexp.MustCompile(`version ([0-9][^ \n]*)`)

// Fingerprint finds qemu-system-x86_64 and checks whether KVM is usable.
func Fingerprint(ctx context.Context) (Info, error) {
	path, err := exec.LookPath(Binary)
	if err != nil {
		return Info{}, fmt.Errorf("%s is not installed on this machine", Binary)
	}
	out, err := exec.CommandContext(ctx, path, "-version").Output()
	if err != nil {
		return Info{}, fmt.Errorf("%s -version: %w", path, err)
	}
	info := Info{Path: path, Accelerators: []string{jobspec.AccelTCG}}
	if m := versionRE.FindSubmatch(out); m != nil {
		info.Version = string(m[1])
	}
	if kvmUsable() {
		info.Accelerators = []string{jobspec.AccelKVM, jobspec.AccelTCG}
	}
	return info, nil
}

func kvmUsable() bool {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Driver is the qemu driver.
type Driver struct {
	Qemu         *Info    // nil: qemu not found
	AllowedPaths []string // images must be below one of these
	// Stopper is the command line of the graceful-shutdown helper; the
	// QMP socket path is appended ("unitvisor qemu-powerdown -timeout 10s").
	Stopper func(timeout time.Duration) []string
}

// Name is the driver name used in job files.
func (Driver) Name() string { return "qemu" }

// Check refuses, at submit, what this machine cannot run.
func (d Driver) Check(t *jobspec.Task) (string, error) {
	c := t.Config
	if d.Qemu == nil {
		return "", fmt.Errorf("%s is not installed on this machine: install it (apt-get install qemu-system-x86)", Binary)
	}
	if !strings.Contains(c.ImagePath, "${") {
		if !d.allowed(c.ImagePath) {
			return "config.image_path", fmt.Errorf("image %s is outside the directories this agent allows (%s): move it there or add its directory to driver \"qemu\" { allowed_paths }",
				c.ImagePath, strings.Join(d.AllowedPaths, ", "))
		}
		if _, err := os.Stat(c.ImagePath); err != nil {
			return "config.image_path", fmt.Errorf("image %s: %w", c.ImagePath, err)
		}
	}
	if c.Accelerator != "" && !slices.Contains(d.Qemu.Accelerators, c.Accelerator) {
		return "config.accelerator", fmt.Errorf("accelerator %q is not usable here (usable: %s): /dev/kvm is missing or not accessible",
			c.Accelerator, strings.Join(d.Qemu.Accelerators, ", "))
	}
	return "", nil
}

func (d Driver) allowed(path string) bool {
	clean := filepath.Clean(path)
	for _, dir := range d.AllowedPaths {
		if rel, err := filepath.Rel(filepath.Clean(dir), clean); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && rel != "." {
			return true
		}
	}
	return false
}

// Prepare builds the qemu command line and the unit spec. qemu runs as the
// task's user (root when none: it writes the image), with the system
// read-only except the task directory and the image.
func (d Driver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	if d.Qemu == nil {
		return units.Spec{}, fmt.Errorf("%s is not installed on this machine", Binary)
	}
	image := in.Interpolate(in.Task.Config.ImagePath)
	if !d.allowed(image) {
		return units.Spec{}, fmt.Errorf("image %s is outside the allowed directories", image)
	}
	acct, err := drivers.TaskAccount(in, "root")
	if err != nil {
		return units.Spec{}, err
	}
	// The unit's memory limit is the guest's RAM plus qemu's overhead.
	withOverhead := in
	task := *in.Task
	guestMB := defaultMemoryMB
	if r := task.Resources; r != nil {
		res := *r
		if res.MemoryLimitMB() > 0 {
			guestMB = res.MemoryLimitMB()
			if res.MemoryMaxMB > 0 {
				res.MemoryMaxMB += overheadMB
			} else {
				res.MemoryMB += overheadMB
			}
		}
		task.Resources = &res
	}
	withOverhead.Task = &task
	props, err := drivers.Base(withOverhead)
	if err != nil {
		return units.Spec{}, err
	}
	if in.Task.User != "" {
		props = append(props, units.String("User", acct.Name))
	}
	props = append(props, drivers.Isolation(in, image)...)
	accel := in.Task.Config.Accelerator
	if accel == "" {
		accel = d.Qemu.Accelerators[0]
	}
	if accel == jobspec.AccelKVM {
		props = append(props, units.Bool("PrivateDevices", false))
	}
	qmp := QMPSocket(in.TaskDir)
	cmd, err := drivers.Command(in, Argv(d.Qemu.Path, in, image, accel, guestMB, qmp))
	if err != nil {
		return units.Spec{}, err
	}
	props = append(props, cmd)
	if in.Task.Config.GracefulShutdown && d.Stopper != nil {
		// ExecStop itself runs under TimeoutStopSec (= kill_timeout): it
		// gives up a little earlier so that it can report, then systemd
		// sends SIGKILL at about kill_timeout.
		wait := in.Task.KillTimeout - min(time.Second, in.Task.KillTimeout/4)
		stop := append(d.Stopper(wait), qmp)
		props = append(props,
			units.ExecStop(stop),
			// After ExecStop (powerdown, waited for up to kill_timeout) what
			// is left is killed outright.
			units.Int32("KillSignal", int32(unix.SIGKILL)))
	}
	return units.Spec{Name: in.Unit, Properties: props}, nil
}

// QMPSocket is where the VM's QMP socket lives.
func QMPSocket(taskDir string) string { return filepath.Join(taskDir, "qmp.sock") }

// Argv is the qemu command line.
func Argv(qemu string, in drivers.Instance, image, accel string, guestMB int, qmp string) []string {
	c := in.Task.Config
	machine := "accel=" + accel
	if c.Machine != "" {
		machine = "type=" + c.Machine + "," + machine
	}
	cpus := 1
	if r := in.Task.Resources; r != nil && r.Cores > 0 {
		cpus = r.Cores
	}
	argv := []string{qemu,
		"-name", in.Unit,
		"-machine", machine,
		"-m", strconv.Itoa(guestMB) + "M",
		"-smp", strconv.Itoa(cpus),
		"-drive", "file=" + image + ",if=virtio,format=" + imageFormat(image),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-qmp", "unix:" + qmp + ",server=on,wait=off",
	}
	if len(c.PortMap) > 0 {
		netdev := "user,id=net0"
		for _, label := range slices.Sorted(maps.Keys(c.PortMap)) {
			host, guest := in.Ports[label], c.PortMap[label]
			for _, proto := range []string{"tcp", "udp"} {
				netdev += fmt.Sprintf(",hostfwd=%s::%d-:%d", proto, host, guest)
			}
		}
		argv = append(argv, "-netdev", netdev, "-device", "virtio-net-pci,netdev=net0")
	}
	for _, a := range c.Args {
		argv = append(argv, in.Interpolate(a))
	}
	return argv
}

// imageFormat tells qcow2 from raw by the qcow2 magic, so that qemu does
// not have to guess (a guessed raw image cannot write its first sector).
func imageFormat(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "raw"
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := f.Read(magic); err == nil && bytes.Equal(magic, []byte{'Q', 'F', 'I', 0xfb}) {
		return "qcow2"
	}
	return "raw"
}
