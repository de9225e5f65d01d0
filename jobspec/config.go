package jobspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// driverConfigFields lists, per driver, the attributes allowed in the
// task's config block. A new driver adds its entry here and the decoding of
// its fields in decodeConfig.
var driverConfigFields = map[string][]string{
	"exec":     {"command", "args"},
	"raw_exec": {"command", "args"},
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
}

// decodeConfig decodes the config block of a task with the given driver
// ("" if the driver is missing or unknown: then the fields of all drivers
// are accepted). Values may reference vars.
func (d *decoder) decodeConfig(block *hcl.Block, driver string, vars []string) Config {
	fields, ok := driverConfigFields[driver]
	if !ok {
		fields = allConfigFields()
	}
	schema := attributeSchema(fields...)
	for _, item := range unknownItems(block.Body, schema) {
		if owners := driversWithField(item.name); driver != "" && len(owners) > 0 {
			d.errorf(item.rng, "Invalid config attribute",
				"%q is a config attribute of driver %s, not of driver %q; allowed: %s",
				item.name, strings.Join(owners, ", "), driver, strings.Join(fields, ", "))
			continue
		}
		d.reportUnknown(item, schema, "config")
	}
	content, _, diags := block.Body.PartialContent(schema)
	d.addHCL(diags)
	attrs := content.Attributes

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
	return cfg
}

// exampleConfigField returns an example setting of a config attribute.
func exampleConfigField(name string) string {
	if name == "command" {
		return `command = "/usr/bin/program"`
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

// decodeArgs decodes config.args, a list of strings that may reference
// vars.
func (d *decoder) decodeArgs(a *hcl.Attribute, vars []string) []string {
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		// Not a list literal; only an empty list ([] in native syntax has
		// no element expressions) is fine.
		val, ok := d.evalInterpolated(a.Expr, vars, "args")
		if ok && !isEmptyList(val) {
			d.errorf(a.Expr.Range(), "Invalid args",
				`args must be a list of strings, e.g. args = ["-m", "http.server"]; got %s`, val.Type().FriendlyName())
		}
		return nil
	}
	var args []string
	for i, e := range exprs {
		if s, ok := d.interpolatedString(e, fmt.Sprintf("args[%d]", i), vars); ok {
			args = append(args, s)
		}
	}
	return args
}

// isEmptyList reports whether val is a known, empty tuple or list.
func isEmptyList(val cty.Value) bool {
	ty := val.Type()
	return (ty.IsTupleType() || ty.IsListType()) && val.IsKnown() && !val.IsNull() && val.LengthInt() == 0
}
