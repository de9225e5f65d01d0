// Package rawexec is the "raw_exec" driver: the task's command as given,
// as the task's user (root when none is set), without isolation. Agents
// keep it disabled unless their config enables it.
package rawexec

import (
	"context"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/units"
)

// Driver is the raw_exec driver.
type Driver struct{}

// Name is the driver name used in job files.
func (Driver) Name() string { return "raw_exec" }

// Prepare creates the task directory and returns the unit spec.
func (Driver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	acct, err := drivers.TaskAccount(in, "root")
	if err != nil {
		return units.Spec{}, err
	}
	props, err := drivers.Base(in)
	if err != nil {
		return units.Spec{}, err
	}
	cmd, err := drivers.Command(in, in.Argv())
	if err != nil {
		return units.Spec{}, err
	}
	props = append(props, cmd)
	if in.Task.User != "" {
		props = append(props, units.String("User", acct.Name))
	}
	return units.Spec{Name: in.Unit, Properties: props}, nil
}
