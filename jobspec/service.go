package jobspec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Defaults and limits of service and check blocks.
const (
	defaultCheckInterval = 10 * time.Second
	defaultCheckTimeout  = 2 * time.Second
	minCheckInterval     = time.Second
	maxCheckDuration     = time.Hour
	defaultRestartGrace  = time.Second
	maxShutdownDelay     = time.Hour
	maxServiceMeta       = 32  // Consul allows 64 pairs; the agent adds its own
	maxMetaKeyLen        = 128 // Consul's limits
	maxMetaValueLen      = 512
)

var (
	serviceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "name"}, {Name: "port"}, {Name: "tags"}, {Name: "address"}, {Name: "enable_tag_override"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "meta"}, {Type: "check"}},
	}
	checkSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "name"}, {Name: "type"}, {Name: "port"}, {Name: "path"}, {Name: "method"},
			{Name: "protocol"}, {Name: "tls_skip_verify"}, {Name: "command"}, {Name: "args"},
			{Name: "interval"}, {Name: "timeout"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "check_restart"}},
	}
	checkRestartSchema = attributeSchema("limit", "grace")

	// checkTypeFields lists the attributes each check type accepts besides
	// name and type.
	checkTypeFields = map[string][]string{
		CheckTTL:    {},
		CheckHTTP:   {"port", "path", "method", "protocol", "tls_skip_verify", "interval", "timeout"},
		CheckTCP:    {"port", "interval", "timeout"},
		CheckScript: {"command", "args", "interval", "timeout"},
	}
	checkTypes = []string{CheckTTL, CheckHTTP, CheckTCP, CheckScript}

	serviceNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	metaKeyRE     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	httpMethods   = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"}
)

// decodeServices decodes the service blocks of a task and its
// shutdown_delay; values may reference vars.
func (d *decoder) decodeServices(task *Task, blocks []*hcl.Block, delay *hcl.Attribute, vars []string) {
	nameAt := map[string]hcl.Range{}
	for _, b := range blocks {
		svc, nameRange, ok := d.decodeService(task, b, vars)
		if !ok {
			continue
		}
		if prev, dup := nameAt[svc.Name]; dup {
			d.errorf(nameRange, "Duplicate service",
				"service %q is already defined at %s; service names must be unique within a task", svc.Name, posString(prev))
			continue
		}
		nameAt[svc.Name] = nameRange
		task.Services = append(task.Services, svc)
	}
	if delay != nil {
		dur, ok := d.durationAttr(delay)
		if ok && dur > maxShutdownDelay {
			d.errorf(delay.Expr.Range(), "Invalid duration", `shutdown_delay must be at most 1h, e.g. "5s"; got %s`, dur)
			ok = false
		}
		if ok {
			task.ShutdownDelay = dur
		}
	}
}

// decodeService decodes one service block. ok is false when its name is
// missing or invalid (other problems are recorded but the service is kept,
// so duplicates are still found).
func (d *decoder) decodeService(task *Task, block *hcl.Block, vars []string) (svc Service, nameRange hcl.Range, ok bool) {
	content := d.content(block.Body, serviceSchema, "service")
	attrs := content.Attributes
	a := attrs["name"]
	if a == nil {
		d.errorf(block.DefRange, "Missing service name", `service has no name; add name = "web" (it becomes the name in Consul)`)
		return svc, block.DefRange, false
	}
	where := "service"
	if s, valid := d.stringAttr(a); valid && d.check(a.Expr.Range(), "Invalid service name", checkServiceName(s)) {
		svc.Name, ok = s, true
		where = fmt.Sprintf("service %q", s)
	}
	if a := attrs["port"]; a != nil {
		svc.Port, _ = d.portLabelAttr(a, task)
	}
	if a := attrs["tags"]; a != nil {
		svc.Tags = d.stringList(a, vars, `tags = ["v1", "http"]`)
	}
	if a := attrs["address"]; a != nil {
		if s, valid := d.interpolatedString(a.Expr, "address", vars); valid {
			if s == "" {
				d.errorf(a.Expr.Range(), "Invalid address", "address must not be empty; remove it to use the address of Consul's node")
			}
			svc.Address = s
		}
	}
	if a := attrs["enable_tag_override"]; a != nil {
		svc.EnableTagOverride, _ = d.boolAttr(a)
	}
	if b := d.single(content.Blocks, "meta", where); b != nil {
		svc.Meta = d.decodeMeta(b, vars)
	}
	checkAt := map[string]hcl.Range{}
	ttls := 0
	for _, cb := range blocksOfType(content.Blocks, "check") {
		c, rng, valid := d.decodeCheck(task, &svc, cb, vars)
		if !valid {
			continue
		}
		if prev, dup := checkAt[c.Name]; dup {
			d.errorf(rng, "Duplicate check",
				"%s already has a check named %q (at %s); give each check its own name = \"...\"", where, c.Name, posString(prev))
			continue
		}
		if c.Type == CheckTTL {
			if ttls++; ttls > 1 {
				d.errorf(rng, "Duplicate check", "%s has more than one ttl check; they would all follow the same unit state: keep one", where)
				continue
			}
		}
		checkAt[c.Name] = rng
		svc.Checks = append(svc.Checks, c)
	}
	if len(blocksOfType(content.Blocks, "check")) == 0 {
		svc.Checks = []Check{{Name: CheckTTL, Type: CheckTTL}}
	}
	return svc, a.Expr.Range(), ok
}

// decodeCheck decodes a check block of svc. rng is where its name is
// written (or the block, for a default name).
func (d *decoder) decodeCheck(task *Task, svc *Service, block *hcl.Block, vars []string) (c Check, rng hcl.Range, ok bool) {
	content := d.content(block.Body, checkSchema, "check")
	attrs := content.Attributes
	rng = block.DefRange
	a := attrs["type"]
	if a == nil {
		d.errorf(block.DefRange, "Missing check type", `check has no type; add type = "http" (one of: %s)`, strings.Join(checkTypes, ", "))
		return c, rng, false
	}
	typ, valid := d.stringAttr(a)
	if !valid {
		return c, rng, false
	}
	fields, known := checkTypeFields[typ]
	if !known {
		d.errorf(a.Expr.Range(), "Unknown check type", "unknown check type %q;%s use one of: %s",
			typ, didYouMean(typ, checkTypes), strings.Join(checkTypes, ", "))
		return c, rng, false
	}
	c = Check{Name: typ, Type: typ}
	ok = true
	if a := attrs["name"]; a != nil {
		rng = a.Expr.Range()
		if s, valid := d.stringAttr(a); valid && d.check(rng, "Invalid check name", checkName("check", s)) {
			c.Name = s
		} else {
			ok = false
		}
	}
	for name, a := range attrs {
		if name != "name" && name != "type" && !slices.Contains(fields, name) {
			d.errorf(a.NameRange, "Invalid check attribute", "%s is not used by %s checks; allowed: %s",
				name, typ, strings.Join(append([]string{"name", "type"}, fields...), ", "))
		}
	}
	if typ != CheckTTL {
		c.Interval, c.Timeout = defaultCheckInterval, defaultCheckTimeout
		if a := attrs["interval"]; a != nil {
			c.Interval = d.checkDuration(a, minCheckInterval, c.Interval)
		}
		if a := attrs["timeout"]; a != nil {
			c.Timeout = d.checkDuration(a, time.Millisecond, c.Timeout)
		}
	}
	switch typ {
	case CheckHTTP, CheckTCP:
		c.Port = svc.Port
		if a := attrs["port"]; a != nil {
			c.Port, _ = d.portLabelAttr(a, task)
		} else if c.Port == "" {
			d.errorf(block.DefRange, "Missing check port",
				`a %s check needs a port: set port = "label" in the check or in its service (a port label of the task)`, typ)
		}
	}
	if typ == CheckHTTP {
		d.decodeHTTPCheck(&c, attrs, vars)
	}
	if typ == CheckScript {
		if a := attrs["command"]; a != nil {
			c.Command = d.decodeCommand(a, vars)
		} else {
			d.errorf(block.DefRange, "Missing check command",
				`a script check needs a command; add command = "/usr/bin/program" (run in the task's context)`)
		}
		if a := attrs["args"]; a != nil {
			c.Args = d.decodeArgs(a, vars)
		}
	}
	if b := d.single(content.Blocks, "check_restart", fmt.Sprintf("check %q", c.Name)); b != nil {
		if typ == CheckTTL {
			d.errorf(b.DefRange, "Invalid check_restart",
				"a ttl check follows the unit, whose restarts systemd already handles (see restart {}); use check_restart with an http, tcp or script check")
		} else {
			c.CheckRestart = d.decodeCheckRestart(b)
		}
	}
	return c, rng, ok
}

// decodeHTTPCheck decodes the attributes only http checks have.
func (d *decoder) decodeHTTPCheck(c *Check, attrs hcl.Attributes, vars []string) {
	c.Path, c.Method, c.Protocol = "/", "GET", "http"
	if a := attrs["path"]; a != nil {
		if s, ok := d.interpolatedString(a.Expr, "path", vars); ok {
			if !strings.HasPrefix(s, "/") {
				d.errorf(a.Expr.Range(), "Invalid path", `path %q must start with "/", e.g. "/health"`, s)
			} else {
				c.Path = s
			}
		}
	}
	if a := attrs["method"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if m := strings.ToUpper(s); slices.Contains(httpMethods, m) {
				c.Method = m
			} else {
				d.errorf(a.Expr.Range(), "Invalid method", "unknown HTTP method %q; use one of: %s", s, strings.Join(httpMethods, ", "))
			}
		}
	}
	if a := attrs["protocol"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if s == "http" || s == "https" {
				c.Protocol = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid protocol", `protocol must be "http" or "https", got %q`, s)
			}
		}
	}
	if a := attrs["tls_skip_verify"]; a != nil {
		c.TLSSkipVerify, _ = d.boolAttr(a)
	}
}

// decodeCheckRestart decodes a check_restart block.
func (d *decoder) decodeCheckRestart(block *hcl.Block) *CheckRestart {
	attrs := d.content(block.Body, checkRestartSchema, "check_restart").Attributes
	cr := &CheckRestart{Grace: defaultRestartGrace}
	if a := attrs["limit"]; a != nil {
		if n, ok := d.intAttr(a, 1, 1000); ok {
			cr.Limit = n
		}
	} else {
		d.errorf(block.DefRange, "Missing limit",
			"check_restart needs limit, the number of consecutive critical results that restart the task; add limit = 3")
	}
	if a := attrs["grace"]; a != nil {
		if dur, ok := d.durationAttr(a); ok && dur <= maxCheckDuration {
			cr.Grace = dur
		} else if ok {
			d.errorf(a.Expr.Range(), "Invalid duration", `grace must be at most 1h, e.g. "10s"; got %s`, dur)
		}
	}
	return cr
}

// checkDuration decodes an interval or timeout between lo and 1h; def is
// kept when it is invalid.
func (d *decoder) checkDuration(a *hcl.Attribute, lo, def time.Duration) time.Duration {
	dur, ok := d.durationAttr(a)
	if !ok {
		return def
	}
	if dur < lo || dur > maxCheckDuration {
		d.errorf(a.Expr.Range(), "Invalid duration", `%s must be between %s and 1h, e.g. "10s"; got %s`, a.Name, lo, dur)
		return def
	}
	return dur
}

// decodeMeta decodes a service's meta block: Consul metadata whose values
// may reference vars.
func (d *decoder) decodeMeta(block *hcl.Block, vars []string) map[string]string {
	attrs, diags := block.Body.JustAttributes()
	d.addHCL(diags)
	if len(attrs) == 0 {
		return nil
	}
	if len(attrs) > maxServiceMeta {
		d.errorf(block.DefRange, "Too much meta", "meta has %d keys; at most %d are allowed", len(attrs), maxServiceMeta)
	}
	meta := make(map[string]string, len(attrs))
	for name, a := range attrs {
		if !d.check(a.NameRange, "Invalid meta key", checkMetaKey(name)) {
			continue
		}
		s, ok := d.interpolatedString(a.Expr, "meta "+name, vars)
		if !ok {
			continue
		}
		if len(s) > maxMetaValueLen {
			d.errorf(a.Expr.Range(), "Invalid meta value", "meta %s is %d bytes long; Consul allows %d", name, len(s), maxMetaValueLen)
			continue
		}
		meta[name] = s
	}
	return meta
}

// portLabelAttr decodes an attribute naming one of the task's ports.
func (d *decoder) portLabelAttr(a *hcl.Attribute, task *Task) (string, bool) {
	label, ok := d.stringAttr(a)
	if !ok {
		return "", false
	}
	labels := make([]string, len(task.Ports))
	for i, p := range task.Ports {
		labels[i] = p.Label
		if p.Label == label {
			return label, true
		}
	}
	if len(labels) == 0 {
		d.errorf(a.Expr.Range(), "Unknown port", `port %q is not a port of this task, which has none; add port %q {} to the task`, label, label)
		return "", false
	}
	d.errorf(a.Expr.Range(), "Unknown port", "port %q is not a port of this task;%s ports: %s",
		label, didYouMean(label, labels), strings.Join(labels, ", "))
	return "", false
}

// stringList decodes a list of strings that may reference vars.
func (d *decoder) stringList(a *hcl.Attribute, vars []string, example string) []string {
	val, ok := d.evalInterpolated(a.Expr, vars, a.Name)
	if !ok {
		return nil
	}
	if ty := val.Type(); !ty.IsTupleType() && !ty.IsListType() {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be a list of strings, e.g. %s; got %s", a.Name, example, ty.FriendlyName())
		return nil
	}
	var out []string
	for i, elem := range val.AsValueSlice() {
		what := fmt.Sprintf("%s[%d]", a.Name, i)
		if s, ok := d.toString(a.Expr, elem, what); ok {
			if s == "" {
				d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s is empty", what)
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// boolAttr evaluates a bool attribute without references.
func (d *decoder) boolAttr(a *hcl.Attribute) (bool, bool) {
	val, ok := d.evalPlain(a)
	if !ok {
		return false, false
	}
	if val.Type() != cty.Bool {
		d.errorf(a.Expr.Range(), "Invalid type", "%s must be true or false, got %s", a.Name, val.Type().FriendlyName())
		return false, false
	}
	return val.True(), true
}

// checkServiceName validates a service name: Consul serves it in DNS.
func checkServiceName(name string) error {
	if serviceNameRE.MatchString(name) {
		return nil
	}
	return fmt.Errorf("service name %q must be 1 to 63 letters, digits and \"-\", starting and ending with a letter or digit (Consul serves it in DNS)", name)
}

// checkMetaKey validates a service meta key by Consul's rules; keys the
// agent sets itself are reserved.
func checkMetaKey(key string) error {
	switch {
	case len(key) > maxMetaKeyLen || !metaKeyRE.MatchString(key):
		return fmt.Errorf("meta key %q must be 1 to %d letters, digits, \"_\" and \"-\"", key, maxMetaKeyLen)
	case strings.HasPrefix(key, "consul-"), strings.HasPrefix(key, "unitvisor-"), key == "external-source":
		return fmt.Errorf("meta key %q is reserved (consul-*, unitvisor-*, external-source); rename it", key)
	}
	return nil
}
