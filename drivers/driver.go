// Package drivers turns a task instance into the spec of its transient unit.
// The properties every driver shares (name, slice, journal fields,
// environment, restart policy, stop behaviour) are built here; each
// sub-package adds what its driver runs and how it is isolated. Drivers
// never start anything themselves.
package drivers

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// Instance is one instance of a task, as the supervisor hands it to a driver.
type Instance struct {
	Job     *jobspec.Job
	Task    *jobspec.Task
	Index   int
	Unit    string         // unit name
	Slice   string         // e.g. "unitvisor.slice"
	TaskDir string         // absolute; local/, secrets/, tmp/ live under it
	Ports   map[string]int // port label -> host port
	CPUs    string         // CPUs to pin to: the task's cpuset or the cores the agent picked
	// Launcher is the agent's own binary, which runs command lines that
	// would not survive a daemon-reload (see Command); "" runs them as is.
	Launcher string
	Vars     map[string]string // UNITVISOR_* values for interpolation and the environment
}

// Interpolate replaces ${UNITVISOR_*} references in s with this instance's values.
func (in Instance) Interpolate(s string) string { return jobspec.Interpolate(s, in.Vars) }

// Argv returns the task's command and args, interpolated.
func (in Instance) Argv() []string {
	argv := []string{in.Interpolate(in.Task.Config.Command)}
	for _, a := range in.Task.Config.Args {
		argv = append(argv, in.Interpolate(a))
	}
	return argv
}

// stopMargin is how long after kill_timeout we wait before sending SIGKILL
// ourselves (systemd should already have done it).
const stopMargin = 5 * time.Second

// StopWait is how long a stop of this task may take in all.
func StopWait(t *jobspec.Task) time.Duration { return t.KillTimeout + stopMargin }

// Base returns the properties every driver's unit has, resource limits
// included.
func Base(in Instance) ([]units.Property, error) {
	t := in.Task
	env := map[string]string{}
	for k, v := range t.Env {
		env[k] = in.Interpolate(v)
	}
	for k, v := range in.Vars {
		env[k] = v
	}
	env["TMPDIR"] = filepath.Join(in.TaskDir, "tmp")
	props := []units.Property{
		units.String("Description", fmt.Sprintf("unitvisor job %s task %s instance %d", in.Job.Name, t.Name, in.Index)),
		units.String("Slice", in.Slice),
		// exec: the start job fails when the binary cannot be executed,
		// instead of "succeeding" and failing later.
		units.String("Type", "exec"),
		// A task that exits 0 stays loaded (active/exited), so the agent
		// can tell "finished" from "vanished" and does not start it again.
		units.Bool("RemainAfterExit", true),
		units.String("WorkingDirectory", in.TaskDir),
		units.Environment(env),
		units.LogExtraFields(map[string]string{
			"UNITVISOR_JOB":   in.Job.Name,
			"UNITVISOR_TASK":  t.Name,
			"UNITVISOR_INDEX": strconv.Itoa(in.Index),
		}),
		units.Int32("KillSignal", int32(Signal(t.KillSignal))),
		units.USec("TimeoutStopUSec", t.KillTimeout),
		units.Bool("SendSIGKILL", true),
		// Accounting on, so usage can be read from the unit's cgroup.
		units.Bool("MemoryAccounting", true),
		units.Bool("CPUAccounting", true),
		units.Bool("TasksAccounting", true),
	}
	props = append(props, RestartProperties(t.Restart)...)
	res, err := Resources(t.Resources, in.CPUs)
	if err != nil {
		return nil, err
	}
	limits, err := units.ResourceProperties(res)
	if err != nil {
		return nil, err
	}
	return append(props, limits...), nil
}

// RestartProperties expresses a restart policy in systemd's own terms, so
// a crashed task restarts even while the agent is down: at most Attempts
// restarts within Interval, Delay apart, then the unit fails. The start
// limit counts the first start too, hence a burst of Attempts+1 (checked on
// systemd 252: burst 2 gives 2 runs, then "Start request repeated too
// quickly" and the unit fails with Result=exit-code; NRestarts also counts
// the refused restart). Mode "delay" is the agent's: it waits out the
// interval and starts again.
func RestartProperties(p jobspec.RestartPolicy) []units.Property {
	if p.Attempts == 0 {
		return []units.Property{units.String("Restart", "no")}
	}
	return []units.Property{
		units.String("Restart", "on-failure"),
		units.USec("RestartUSec", p.Delay),
		units.USec("StartLimitIntervalUSec", p.Interval),
		units.Uint32("StartLimitBurst", uint32(p.Attempts+1)),
	}
}

// Signal returns the number of a canonical signal name ("SIGTERM");
// jobspec has validated it.
func Signal(name string) unix.Signal {
	if s := unix.SignalNum(name); s != 0 {
		return s
	}
	return unix.SIGTERM
}

// Account is a user to run as, resolved on this machine.
type Account struct {
	Name     string
	UID, GID int
}

// LookupUser resolves a user name or numeric uid.
func LookupUser(name string) (Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return Account{}, fmt.Errorf("user %q does not exist on this machine: create it or change the task's user", name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Account{Name: u.Username, UID: uid, GID: gid}, nil
}

// MakeTaskDir creates the instance's directory with local/, secrets/ (0700)
// and tmp/, owned by acct so the task can write them.
func MakeTaskDir(dir string, acct Account) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create task dir: %w", err)
	}
	for _, sub := range []struct {
		name string
		mode os.FileMode
	}{{"local", 0o755}, {"secrets", 0o700}, {"tmp", 0o755}} {
		p := filepath.Join(dir, sub.name)
		if err := os.MkdirAll(p, sub.mode); err != nil {
			return fmt.Errorf("create task dir: %w", err)
		}
		if err := os.Chmod(p, sub.mode); err != nil {
			return fmt.Errorf("create task dir: %w", err)
		}
		if err := os.Chown(p, acct.UID, acct.GID); err != nil {
			return fmt.Errorf("create task dir: %w", err)
		}
	}
	return nil
}
