package drivers

import (
	"github.com/unitvisor/unitvisor/units"
)

// DefaultUser runs isolated tasks that name no user (as in Nomad).
const DefaultUser = "nobody"

// PrepareIsolated resolves the task's user (default nobody), creates its
// task directory and returns the shared properties plus the isolation that
// systemd gives for free: no new privileges, private /tmp, a read-only
// system with only the task directory (and extra) writable, hidden homes,
// protected kernel and cgroups. exec and java tasks run like this.
func PrepareIsolated(in Instance, extraWritable ...string) ([]units.Property, error) {
	acct, err := TaskAccount(in, DefaultUser)
	if err != nil {
		return nil, err
	}
	props, err := Base(in)
	if err != nil {
		return nil, err
	}
	props = append(props, units.String("User", acct.Name))
	return append(props, Isolation(in, extraWritable...)...), nil
}

// Isolation is the hardening part of PrepareIsolated, for drivers that
// choose their user themselves.
func Isolation(in Instance, extraWritable ...string) []units.Property {
	// PrivateDevices gives a /dev with the pseudo devices only; a task that
	// lists devices gets the host's /dev, limited by DeviceAllow instead.
	privateDevices := in.Task.Resources == nil || len(in.Task.Resources.Devices) == 0
	return []units.Property{
		units.Bool("NoNewPrivileges", true),
		units.Bool("PrivateTmp", true),
		units.Bool("PrivateDevices", privateDevices),
		units.String("ProtectSystem", "strict"),
		units.String("ProtectHome", "yes"),
		units.Strings("ReadWritePaths", append([]string{in.TaskDir}, extraWritable...)),
		units.Bool("ProtectKernelTunables", true),
		units.Bool("ProtectKernelModules", true),
		units.Bool("ProtectControlGroups", true),
		units.Bool("RestrictSUIDSGID", true),
		units.Bool("LockPersonality", true),
	}
}

// TaskAccount resolves the task's user (fallback when it names none) and
// creates the task directory owned by it.
func TaskAccount(in Instance, fallback string) (Account, error) {
	name := in.Task.User
	if name == "" {
		name = fallback
	}
	acct, err := LookupUser(name)
	if err != nil {
		return Account{}, err
	}
	return acct, MakeTaskDir(in.TaskDir, acct)
}
