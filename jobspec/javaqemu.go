package jobspec

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var (
	javaClassRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*$`)
	machineRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// Accelerators of the qemu driver.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// decodeJavaConfig decodes the java driver's fields: jar_path, or class
// with class_path; jvm_options; java_home.
func (d *decoder) decodeJavaConfig(cfg *Config, block *hcl.Block, driver string, attrs hcl.Attributes, vars []string) {
	if a := attrs["jar_path"]; a != nil {
		cfg.JarPath = d.absPath(a, vars)
	}
	if a := attrs["class"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if javaClassRE.MatchString(s) {
				cfg.Class = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid class", "class %q is not a Java class name such as com.example.Main", s)
			}
		}
	}
	if a := attrs["class_path"]; a != nil {
		if s, ok := d.interpolatedString(a.Expr, "class_path", vars); ok {
			cfg.ClassPath = s
		}
	}
	if a := attrs["jvm_options"]; a != nil {
		cfg.JVMOptions = d.decodeArgs(a, vars)
	}
	if a := attrs["java_home"]; a != nil {
		cfg.JavaHome = d.absPath(a, vars)
	}
	if driver != "java" {
		return
	}
	switch {
	case attrs["jar_path"] == nil && attrs["class"] == nil:
		d.errorf(block.DefRange, "Missing jar_path or class",
			`driver "java" runs a jar or a class: add jar_path = "/opt/app/app.jar", or class = "com.example.Main" with class_path`)
	case attrs["jar_path"] != nil && attrs["class"] != nil:
		d.errorf(attrs["class"].Expr.Range(), "Conflicting config",
			"set either jar_path or class, not both")
	case attrs["class_path"] != nil && attrs["class"] == nil:
		d.errorf(attrs["class_path"].Expr.Range(), "Conflicting config",
			"class_path goes with class; a jar names its own class path in its manifest")
	}
}

// decodeQemuConfig decodes the qemu driver's fields.
func (d *decoder) decodeQemuConfig(cfg *Config, attrs hcl.Attributes, vars []string) {
	if a := attrs["image_path"]; a != nil {
		cfg.ImagePath = d.absPath(a, vars)
	}
	if a := attrs["accelerator"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if s == AccelKVM || s == AccelTCG {
				cfg.Accelerator = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid accelerator",
					`unknown accelerator %q;%s use "kvm" (hardware, needs /dev/kvm) or "tcg" (emulation)`, s, didYouMean(s, []string{AccelKVM, AccelTCG}))
			}
		}
	}
	if a := attrs["machine"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if machineRE.MatchString(s) {
				cfg.Machine = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid machine", "machine %q is not a qemu machine type such as q35 or pc", s)
			}
		}
	}
	if a := attrs["graceful_shutdown"]; a != nil {
		if v, ok := d.evalPlain(a); ok {
			if v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() {
				cfg.GracefulShutdown = v.True()
			} else {
				d.errorf(a.Expr.Range(), "Invalid type", "graceful_shutdown must be true or false")
			}
		}
	}
	if a := attrs["port_map"]; a != nil {
		cfg.PortMap = d.decodePortMap(a, vars)
	}
}

// decodePortMap decodes port_map = { label = guest_port }; every label must
// be a port of the task.
func (d *decoder) decodePortMap(a *hcl.Attribute, vars []string) map[string]int {
	v, ok := d.evalPlain(a)
	if !ok {
		return nil
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() || v.IsNull() {
		d.errorf(a.Expr.Range(), "Invalid port_map", `port_map must map port labels to guest ports, e.g. port_map = { http = 80 }`)
		return nil
	}
	out := map[string]int{}
	ports := v.AsValueMap()
	for _, label := range slices.Sorted(maps.Keys(ports)) {
		port := ports[label]
		if !slices.Contains(vars, VarPortPrefix+label) {
			d.errorf(a.Expr.Range(), "Unknown port", `port_map names port %q, which the task does not have; add port %q {}`, label, label)
			continue
		}
		n, ok := ctyInt(port)
		if !ok || n < 1 || n > maxPort {
			d.errorf(a.Expr.Range(), "Invalid port", "port_map.%s must be a guest port between 1 and %d", label, maxPort)
			continue
		}
		out[label] = n
	}
	return out
}

func ctyInt(v cty.Value) (int, bool) {
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		return 0, false
	}
	f := v.AsBigFloat()
	n, acc := f.Int64()
	return int(n), f.IsInt() && acc == 0
}

// absPath decodes an absolute path (possibly below ${UNITVISOR_TASK_DIR}).
func (d *decoder) absPath(a *hcl.Attribute, vars []string) string {
	p, ok := d.interpolatedString(a.Expr, a.Name, vars)
	if !ok {
		return ""
	}
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "${"+VarTaskDir+"}") {
		d.errorf(a.Expr.Range(), "Invalid path", "%s %q is not an absolute path; use the absolute path", a.Name, p)
		return ""
	}
	return p
}
