package drivers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitvisor/unitvisor/units"
)

// ArgvFile is where Command keeps a command line that is not reload-safe.
const ArgvFile = "argv.json"

// Command returns the ExecStart running argv. systemd expands nothing in
// it. A command line that would not survive a daemon-reload intact on
// systemd 252 (see units.ReloadSafe: ";", "$", quotes...) is written to
// the task directory and started through the launcher, `unitvisor
// exec-task FILE`, which replaces itself (execve) with exactly argv: the
// task is still the unit's main process and nothing stays in between.
func Command(in Instance, argv []string) (units.Property, error) {
	if in.Launcher == "" || units.ReloadSafe(argv) {
		return units.ExecStart(argv), nil
	}
	b, err := json.Marshal(argv)
	if err != nil {
		return units.Property{}, err
	}
	file := filepath.Join(in.TaskDir, ArgvFile)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return units.Property{}, fmt.Errorf("write command line: %w", err)
	}
	launch := []string{in.Launcher, "exec-task", file}
	if !units.ReloadSafe(launch) {
		return units.Property{}, fmt.Errorf("launcher path %q or task dir %q has characters systemd cannot keep across a reload: use plain paths", in.Launcher, in.TaskDir)
	}
	return units.ExecStart(launch), nil
}
