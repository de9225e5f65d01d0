package units

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// OOMNotifier reports kernel OOM kills in units' cgroups on hosts whose
// memory controller is cgroup v1, where systemd cannot tell them from any
// other SIGKILL (Result=signal) and the cgroup with its counters is gone
// right after the kill. It registers an eventfd on each unit's
// memory.oom_control (cgroup.event_control), which the kernel signals when
// the cgroup runs out of memory, and also when the cgroup is removed. On
// cgroup v2 it does nothing: systemd itself reports Result=oom-kill.
type OOMNotifier struct {
	root  string // /sys/fs/cgroup
	slice string

	mu    sync.Mutex
	armed map[string]uint32 // unit -> MainPID it was armed for
}

// NewOOMNotifier returns a notifier for units in slice, or nil when the
// host's memory controller is not cgroup v1.
func NewOOMNotifier(root, slice string) *OOMNotifier {
	if _, err := os.Stat(filepath.Join(root, "memory", "memory.oom_control")); err != nil {
		return nil
	}
	return &OOMNotifier{root: root, slice: slice, armed: map[string]uint32{}}
}

// Arm watches the unit's current cgroup (once per main process: a restart
// gets a new cgroup) and calls onOOM when the kernel's OOM killer acts in
// it. It returns without error when the unit is already armed for pid.
func (n *OOMNotifier) Arm(unit string, pid uint32, onOOM func()) error {
	n.mu.Lock()
	if n.armed[unit] == pid {
		n.mu.Unlock()
		return nil
	}
	n.armed[unit] = pid
	n.mu.Unlock()

	dir := filepath.Join(n.root, "memory", UnitCgroup(n.slice, unit))
	ctl, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return fmt.Errorf("watch OOM of %s: %w", unit, err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ctl.Close()
		return fmt.Errorf("watch OOM of %s: eventfd: %w", unit, err)
	}
	ev := os.NewFile(uintptr(efd), "oom-eventfd") // non-blocking: parks in the netpoller
	reg := fmt.Sprintf("%d %d", efd, ctl.Fd())
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(reg), 0); err != nil {
		ctl.Close()
		ev.Close()
		return fmt.Errorf("watch OOM of %s: %w", unit, err)
	}
	go func() {
		defer ctl.Close()
		defer ev.Close()
		buf := make([]byte, 8)
		for {
			if _, err := ev.Read(buf); err != nil {
				return
			}
			// The same eventfd fires when the cgroup is removed; an OOM
			// leaves the cgroup in place (its processes are being killed).
			if _, err := os.Stat(filepath.Join(dir, "memory.oom_control")); err != nil {
				n.forget(unit, pid)
				return
			}
			onOOM()
		}
	}()
	return nil
}

func (n *OOMNotifier) forget(unit string, pid uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.armed[unit] == pid {
		delete(n.armed, unit)
	}
}
