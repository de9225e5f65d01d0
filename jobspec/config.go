package jobspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// driverConfigFields lists, per driver, the attributes allowed in the
// task's config block. A new driver adds its entry here and the decoding of
// its fields in decodeConfig.
var driverConfigFields = map[string][]string{
	"exec":     {"command", "args"},
	"raw_exec": {"command", "args"},
	"java":     {"jar_path", "class", "class_path", "jvm_options", "args", "java_home"},
	"qemu":     {"image_path", "accelerator", "machine", "args", "port_map", "graceful_shutdown"},
	"docker": {"image", "load", "entrypoint", "args", "work_dir", "volumes", "readonly_rootfs",
		"network_mode", "auth", "cap_add", "cap_drop", "init"},
}

// drivers returns the known driver names, sorted.
func drivers() []string {
	return slices.Sorted(maps.Keys(driverConfigFields))
}

// allConfigFields returns the config attributes of all drivers, sorted.
func allConfigFields() []string {
	var all []string
	for _, fields := range driverConfigFields {
		all = append(all, fields...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// driversWithField returns the drivers accepting the config field, sorted.
func driversWithField(field string) []string {
	var out []string
	for _, d := range drivers() {
		if slices.Contains(driverConfigFields[d], field) {
			out = append(out, d)
		}
	}
	return out
}

// driverRequiredFields lists, per driver, the config attributes that must be
// set.
var driverRequiredFields = map[string][]string{
	"exec":     {"command"},
	"raw_exec": {"command"},
	"qemu":     {"image_path"},
}

// decodeConfig decodes the config block of a task with the given driver
// ("" if the driver is missing or unknown: then the fields of all drivers
// are accepted). Values may reference vars. Positions of the attributes go
// to pos as "config.<name>".
func (d *decoder) decodeConfig(block *hcl.Block, driver string, vars []string, pos map[string]string) Config {
	fields, ok := driverConfigFields[driver]
	if !ok {
		fields = allConfigFields()
	}
	schema := attributeSchema(fields...)
	attrs := d.contentWith(block.Body, schema, func(item bodyItem) {
		if owners := driversWithField(item.name); driver != "" && len(owners) > 0 {
			d.errorf(item.rng, "Invalid config attribute",
				"%q is a config attribute of driver %s, not of driver %q; allowed: %s",
				item.name, strings.Join(owners, ", "), driver, strings.Join(fields, ", "))
			return
		}
		d.reportUnknown(item, schema, "config")
	}).Attributes
	for name, a := range attrs {
		pos["config."+name] = posString(a.Expr.Range())
	}

	for _, name := range driverRequiredFields[driver] {
		if attrs[name] == nil {
			d.errorf(block.DefRange, "Missing "+name, "driver %q requires %s in config; add %s",
				driver, name, exampleConfigField(name))
		}
	}
	var cfg Config
	if a := attrs["command"]; a != nil {
		cfg.Command = d.decodeCommand(a, vars)
	}
	if a := attrs["args"]; a != nil {
		cfg.Args = d.decodeArgs(a, vars)
	}
	d.decodeJavaConfig(&cfg, block, driver, attrs, vars)
	d.decodeQemuConfig(&cfg, attrs, vars)
	d.decodeDockerConfig(&cfg, block, driver, attrs, vars)
	return cfg
}

// exampleConfigField returns an example setting of a config attribute.
func exampleConfigField(name string) string {
	switch name {
	case "command":
		return `command = "/usr/bin/program"`
	case "image_path":
		return `image_path = "/var/lib/images/vm.qcow2"`
	}
	return name + " = ..."
}

// decodeCommand decodes config.command, which must be an absolute path
// (possibly below ${UNITVISOR_TASK_DIR}).
func (d *decoder) decodeCommand(a *hcl.Attribute, vars []string) string {
	command, ok := d.interpolatedString(a.Expr, "command", vars)
	if !ok {
		return ""
	}
	if !strings.HasPrefix(command, "/") && !strings.HasPrefix(command, "${"+VarTaskDir+"}") {
		d.errorf(a.Expr.Range(), "Invalid command",
			"command %q is not an absolute path; use the absolute path, e.g. /usr/bin/python3", command)
		return ""
	}
	return command
}

// decodeArgs decodes a list of strings that may reference vars, such as
// config.args or config.jvm_options.
func (d *decoder) decodeArgs(a *hcl.Attribute, vars []string) []string {
	var args []string
	if exprs, diags := hcl.ExprList(a.Expr); !diags.HasErrors() {
		// A list literal: check each element, with its own position.
		for i, e := range exprs {
			if s, ok := d.interpolatedString(e, fmt.Sprintf("%s[%d]", a.Name, i), vars); ok {
				args = append(args, s)
			}
		}
		return args
	}
	// Another expression, or [] (which has no element expressions).
	val, ok := d.evalInterpolated(a.Expr, vars, a.Name)
	if !ok {
		return nil
	}
	if ty := val.Type(); !ty.IsTupleType() && !ty.IsListType() {
		example := `["-m", "http.server"]`
		if a.Name == "jvm_options" {
			example = `["-Xmx512m", "-Dfile.encoding=UTF-8"]`
		}
		if a.Name == "entrypoint" {
			example = `["/bin/sh", "-c"]`
		}
		d.errorf(a.Expr.Range(), "Invalid "+a.Name,
			`%s must be a list of strings, e.g. %s = %s; got %s`, a.Name, a.Name, example, ty.FriendlyName())
		return nil
	}
	for i, elem := range val.AsValueSlice() {
		if s, ok := d.toString(a.Expr, elem, fmt.Sprintf("%s[%d]", a.Name, i)); ok {
			args = append(args, s)
		}
	}
	return args
}
