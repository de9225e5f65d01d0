// Package exec is the "exec" driver: the task's command, isolated the way
// systemd isolates services for free — a non-root user (default "nobody",
// as in Nomad), no new privileges, private /tmp, a read-only system and
// hidden homes, with only the task directory writable.
package exec

import (
	"context"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/units"
)

// DefaultUser runs tasks that name no user.
const DefaultUser = "nobody"

// Driver is the exec driver.
type Driver struct{}

// Name is the driver name used in job files.
func (Driver) Name() string { return "exec" }

// Prepare creates the task directory and returns the unit spec.
func (Driver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	name := in.Task.User
	if name == "" {
		name = DefaultUser
	}
	acct, err := drivers.LookupUser(name)
	if err != nil {
		return units.Spec{}, err
	}
	if err := drivers.MakeTaskDir(in.TaskDir, acct); err != nil {
		return units.Spec{}, err
	}
	props, err := drivers.Base(in)
	if err != nil {
		return units.Spec{}, err
	}
	// PrivateDevices gives a /dev with the pseudo devices only; a task that
	// lists devices gets the host's /dev, limited by DeviceAllow instead.
	privateDevices := in.Task.Resources == nil || len(in.Task.Resources.Devices) == 0
	props = append(props,
		units.ExecStart(in.Argv()),
		units.String("User", acct.Name),
		units.Bool("NoNewPrivileges", true),
		units.Bool("PrivateTmp", true),
		units.Bool("PrivateDevices", privateDevices),
		units.String("ProtectSystem", "strict"),
		units.String("ProtectHome", "yes"),
		units.Strings("ReadWritePaths", []string{in.TaskDir}),
		units.Bool("ProtectKernelTunables", true),
		units.Bool("ProtectKernelModules", true),
		units.Bool("ProtectControlGroups", true),
		units.Bool("RestrictSUIDSGID", true),
		units.Bool("LockPersonality", true),
	)
	return units.Spec{Name: in.Unit, Properties: props}, nil
}
