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

// execCommandEx is one entry of ExecStartEx: D-Bus (sasas).
type execCommandEx struct {
	Path  string
	Args  []string
	Flags []string
}

// ExecStart runs argv[0] with argv (argv[0] included) and tells systemd not
// to expand $VARS: interpolation is unitvisor's job, and an argument like
// "${PATH}" must reach the process as written.
func ExecStart(argv []string) Property {
	return prop("ExecStartEx", []execCommandEx{{Path: argv[0], Args: argv, Flags: []string{"no-env-expand"}}})
}

// ExecStop runs argv when the unit is stopped, before the KillSignal;
// like ExecStart, systemd expands nothing in it.
func ExecStop(argv []string) Property {
	return prop("ExecStopEx", []execCommandEx{{Path: argv[0], Args: argv, Flags: []string{"no-env-expand"}}})
}

// ExecStartPre runs argv before ExecStart; with ignoreFailure a failure
// does not fail the start. Nothing is expanded.
func ExecStartPre(argv []string, ignoreFailure bool) Property {
	return prop("ExecStartPreEx", []execCommandEx{{Path: argv[0], Args: argv, Flags: execFlags(ignoreFailure)}})
}

// ExecStopPost runs argv after the unit's processes are gone, also after
// a failed start or a crash. Nothing is expanded.
func ExecStopPost(argv []string, ignoreFailure bool) Property {
	return prop("ExecStopPostEx", []execCommandEx{{Path: argv[0], Args: argv, Flags: execFlags(ignoreFailure)}})
}

func execFlags(ignoreFailure bool) []string {
	if ignoreFailure {
		return []string{"no-env-expand", "ignore-failure"}
	}
	return []string{"no-env-expand"}
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
	"ExecStartEx":        243,
	"ExecStopEx":         243,
	"ExecStartPreEx":     243,
	"ExecStopPostEx":     243,
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
