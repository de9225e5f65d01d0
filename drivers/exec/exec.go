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

// Driver is the exec driver.
type Driver struct{}

// Name is the driver name used in job files.
func (Driver) Name() string { return "exec" }

// Prepare creates the task directory and returns the unit spec.
func (Driver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	props, err := drivers.PrepareIsolated(in)
	if err != nil {
		return units.Spec{}, err
	}
	cmd, err := drivers.Command(in, in.Argv())
	if err != nil {
		return units.Spec{}, err
	}
	props = append(props, cmd)
	return units.Spec{Name: in.Unit, Properties: props}, nil
}
