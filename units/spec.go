package units

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Property is one unit property with its D-Bus type fixed by the builder
// that made it.
type Property = sddbus.Property

// Spec is a transient unit to start: a name and its properties.
type Spec struct {
	Name       string
	Properties []Property
}

// Get returns the value of the named property, if the spec has it.
func (s Spec) Get(name string) (any, bool) {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Value.Value(), true
		}
	}
	return nil, false
}

// The typed builders below fix each property's D-Bus signature; systemd
// rejects a whole StartTransientUnit call for one wrong type.

// String is a property of D-Bus type "s".
func String(name, v string) Property { return prop(name, v) }

// Bool is a property of D-Bus type "b".
func Bool(name string, v bool) Property { return prop(name, v) }

// Uint32 is a property of D-Bus type "u".
func Uint32(name string, v uint32) Property { return prop(name, v) }

// Uint64 is a property of D-Bus type "t".
func Uint64(name string, v uint64) Property { return prop(name, v) }

// Int32 is a property of D-Bus type "i".
func Int32(name string, v int32) Property { return prop(name, v) }

// Strings is a property of D-Bus type "as".
func Strings(name string, v []string) Property { return prop(name, v) }

// USec is a time span property ("t", microseconds), e.g. RestartUSec.
func USec(name string, d time.Duration) Property { return prop(name, uint64(d/time.Microsecond)) }

// ExecStart runs argv[0] with argv (argv[0] included); systemd expands
// nothing in it: interpolation is unitvisor's job, and an argument like
// "${PATH}" must reach the process as written. It uses the classic
// ExecStart with "$" escaped (see Exec), not ExecStartEx with
// no-env-expand: systemd 252 loses ExecStartEx on daemon-reload, after
// which a restarting unit has no command (checked). The classic form has a
// reload problem too: see ReloadSafe.
func ExecStart(argv []string) Property { return Exec("ExecStart", argv, false) }

// ExecStop runs argv when the unit is stopped, before the KillSignal;
// like ExecStart, systemd expands nothing in it.
func ExecStop(argv []string) Property { return Exec("ExecStop", argv, false) }

// execCommand is one entry of ExecStart, ExecStartPre, ExecStopPost...:
// D-Bus (sasb), the bool being "ignore failure".
type execCommand struct {
	Path          string
	Args          []string
	IgnoreFailure bool
}

// Exec sets a command property such as ExecStart, ExecStartPre or
// ExecStopPost in its classic form, each "$" escaped as "$$" so that
// systemd expands nothing. Unlike the Ex variants (ExecStartEx...),
// systemd 252 writes these into the transient unit file in a form it
// reads back: they survive daemon-reload and daemon-reexec (checked: after
// a reexec a unit started with ExecStopPostEx had no ExecStopPost left).
func Exec(name string, argv []string, ignoreFailure bool) Property {
	esc := make([]string, len(argv))
	for i, a := range argv {
		esc[i] = strings.ReplaceAll(a, "$", "$$")
	}
	return prop(name, []execCommand{{Path: argv[0], Args: esc, IgnoreFailure: ignoreFailure}})
}

// ReloadSafe reports whether argv survives a daemon-reload intact. systemd
// 252 writes a transient unit's command line into its unit file escaping
// ";" as "\;" and "$" as "\$" inside quotes, and reads those back as
// unknown escapes: after a reload a restarting unit runs a garbled command
// (checked with ";", "$", "\" and quotes). Arguments made only of the
// characters below survive; callers route other command lines through a
// file (see drivers.Command).
func ReloadSafe(argv []string) bool {
	for _, a := range argv {
		if a == "" {
			return false
		}
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_@%+=:,./- ", c)) {
				return false
			}
		}
	}
	return true
}

// ExitStatus is a property of D-Bus type "(aiai)" such as
// SuccessExitStatus: exit statuses and signals.
func ExitStatus(name string, statuses, signals []int32) Property {
	return prop(name, struct {
		Statuses []int32
		Signals  []int32
	}{statuses, signals})
}

// Environment sets the process environment from a map, in a stable order.
func Environment(env map[string]string) Property {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, 0, len(keys))
	for _, k := range keys {
		kv = append(kv, k+"="+env[k])
	}
	return Strings("Environment", kv)
}

// LogExtraFields adds journal fields (KEY=value) to every line the unit
// logs, so `journalctl UNITVISOR_JOB=web` finds it. D-Bus type "aay".
func LogExtraFields(fields map[string]string) Property {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	v := make([][]byte, 0, len(keys))
	for _, k := range keys {
		v = append(v, []byte(k+"="+fields[k]))
	}
	return prop("LogExtraFields", v)
}

func prop(name string, v any) Property { return Property{Name: name, Value: dbus.MakeVariant(v)} }

// propertySince holds the first systemd version that accepts a property in
// StartTransientUnit, for properties newer than Debian oldstable's 247. One
// unknown property fails the whole call, so Start checks before sending.
var propertySince = map[string]int{
	"LogExtraFields":     240,
	"AllowedCPUs":        244,
	"AllowedMemoryNodes": 244,
	"CPUQuotaPeriodUSec": 242,
}

// checkVersion returns an error naming the first property that the manager
// (version v) does not know.
func checkVersion(v int, props []Property) error {
	for _, p := range props {
		if need, ok := propertySince[p.Name]; ok && v > 0 && v < need {
			return fmt.Errorf("property %s needs systemd >= %d, this host runs %d", p.Name, need, v)
		}
	}
	return nil
}

// parseVersion reads the leading number of Manager.Version ("252.39-1~deb12u2").
func parseVersion(s string) int {
	s = strings.Trim(s, `"`)
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	v, _ := strconv.Atoi(s[:end])
	return v
}
