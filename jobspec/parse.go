package jobspec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
)

// ParseFile reads the job file at path and parses it with Parse.
func ParseFile(path string) (*Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	return Parse(path, src)
}

// Parse parses and validates the job file src. A filename ending in ".json"
// selects HCL's JSON syntax, any other the native HCL syntax; filename also
// prefixes the diagnostics. Defaults are applied to the returned Job.
//
// On failure the error is a Diagnostics listing every problem found.
func Parse(filename string, src []byte) (*Job, error) {
	file, diags := parseSyntax(filename, src)
	if diags.HasErrors() {
		errs := fromHCL(filename, diags)
		errs.sortByPosition()
		return nil, errs
	}
	d := &decoder{filename: filename}
	job := d.decodeFile(file.Body)
	if len(d.diags) > 0 {
		d.diags.sortByPosition()
		return nil, d.diags
	}
	return job, nil
}

// parseSyntax parses src as JSON or native HCL depending on filename.
func parseSyntax(filename string, src []byte) (*hcl.File, hcl.Diagnostics) {
	if strings.EqualFold(filepath.Ext(filename), ".json") {
		return hcljson.Parse(src, filename)
	}
	return hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
}

// Schemas of the blocks of a job file. Attributes are listed before blocks
// in the order they are shown to users in "allowed: ..." hints.
var (
	fileSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "job", LabelNames: []string{"name"}}},
	}
	jobSchema = &hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: "task", LabelNames: []string{"name"}}},
	}
	taskSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "driver"}, {Name: "count"}, {Name: "user"},
			{Name: "kill_signal"}, {Name: "kill_timeout"},
			{Name: "shutdown_delay"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "config"}, {Type: "env"},
			{Type: "port", LabelNames: []string{"label"}}, {Type: "restart"},
			{Type: "resources"},
			{Type: "service"},
		},
	}
	portSchema    = attributeSchema("static")
	restartSchema = attributeSchema("attempts", "interval", "delay", "mode")
)

// attributeSchema returns a schema of optional attributes and no blocks.
func attributeSchema(names ...string) *hcl.BodySchema {
	schema := &hcl.BodySchema{}
	for _, name := range names {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: name})
	}
	return schema
}

// staticPort is a static port of a task, remembered to find clashes.
type staticPort struct {
	port  int
	task  string
	label string
	rng   hcl.Range // of the static value
}

// decodeFile decodes the single job of a file.
func (d *decoder) decodeFile(body hcl.Body) *Job {
	content := d.content(body, fileSchema, "the file")
	if len(content.Blocks) == 0 {
		d.errorf(content.MissingItemRange, "Missing job",
			`the file defines no job; add job "name" { task "name" { ... } }`)
		return nil
	}
	first := content.Blocks[0]
	for _, extra := range content.Blocks[1:] {
		d.errorf(extra.DefRange, "Extra job",
			"a file holds exactly one job and the job at %s comes first; move this job to its own file",
			posString(first.DefRange))
	}
	return d.decodeJob(first)
}

// decodeJob decodes a job block, its tasks, and checks the rules that span
// tasks: unique task names and static ports.
func (d *decoder) decodeJob(block *hcl.Block) *Job {
	job := &Job{Name: block.Labels[0]}
	d.check(block.LabelRanges[0], "Invalid job name", checkName("job", job.Name))

	content := d.content(block.Body, jobSchema, fmt.Sprintf("job %q", job.Name))
	if len(content.Blocks) == 0 {
		d.errorf(block.DefRange, "Missing task",
			`job %q has no tasks; add at least one task "name" { driver = "exec" ... }`, job.Name)
	}

	taskAt := map[string]hcl.Range{}
	portAt := map[int]staticPort{}
	for _, tb := range content.Blocks {
		task, statics := d.decodeTask(tb)
		if prev, dup := taskAt[task.Name]; dup {
			d.errorf(tb.LabelRanges[0], "Duplicate task",
				"task %q is already defined at %s; task names must be unique within a job",
				task.Name, posString(prev))
			continue
		}
		taskAt[task.Name] = tb.LabelRanges[0]
		job.Tasks = append(job.Tasks, task)
		for _, sp := range statics {
			if prev, used := portAt[sp.port]; used {
				d.errorf(sp.rng, "Port clash",
					"static port %d is already used by task %q port %q at %s; use another port or a dynamic one (port %q {})",
					sp.port, prev.task, prev.label, posString(prev.rng), sp.label)
				continue
			}
			portAt[sp.port] = sp
		}
	}
	return job
}

// decodeTask decodes a task block, applying defaults. It also returns the
// task's static ports.
func (d *decoder) decodeTask(block *hcl.Block) (*Task, []staticPort) {
	task := &Task{
		Name:        block.Labels[0],
		Count:       defaultCount,
		Restart:     defaultRestartPolicy(),
		KillSignal:  defaultKillSignal,
		KillTimeout: defaultKillTimeout,
	}
	d.check(block.LabelRanges[0], "Invalid task name", checkName("task", task.Name))
	where := fmt.Sprintf("task %q", task.Name)
	content := d.content(block.Body, taskSchema, where)
	attrs := content.Attributes
	task.Pos = map[string]string{"": posString(block.DefRange)}
	for name, a := range attrs {
		task.Pos[name] = posString(a.Expr.Range())
	}

	task.Driver = d.decodeDriver(attrs["driver"], block, where)
	if a := attrs["count"]; a != nil {
		if n, ok := d.intAttr(a, 1, maxCount); ok {
			task.Count = n
		}
	}
	statics := d.decodePorts(task, blocksOfType(content.Blocks, "port"))
	vars := taskVars(task.Ports)

	if b := d.single(content.Blocks, "config", where); b != nil {
		task.Config = d.decodeConfig(b, task.Driver, vars, task.Pos)
	} else if task.Driver != "" {
		d.errorf(block.DefRange, "Missing config",
			`%s has no config block; add config { command = "/usr/bin/program" }`, where)
	}
	if b := d.single(content.Blocks, "env", where); b != nil {
		task.Env = d.decodeEnv(b, vars)
	}
	if a := attrs["user"]; a != nil {
		if s, ok := d.stringAttr(a); ok && d.check(a.Expr.Range(), "Invalid user", checkUser(s)) {
			task.User = s
		}
	}
	if b := d.single(content.Blocks, "restart", where); b != nil {
		task.Restart = d.decodeRestart(b)
	}
	d.decodeKill(task, attrs)
	if b := d.single(content.Blocks, "resources", where); b != nil {
		task.Resources = d.decodeResources(b, task.Pos)
	}
	d.decodeServices(task, blocksOfType(content.Blocks, "service"), attrs["shutdown_delay"], vars)

	if task.Count > 1 {
		for _, sp := range statics {
			d.errorf(sp.rng, "Port clash",
				"static port %d would be bound by all %d instances of %s (count = %d); use a dynamic port (port %q {}) or count = 1",
				sp.port, task.Count, where, task.Count, sp.label)
		}
	}
	for i := range statics {
		statics[i].task = task.Name
	}
	return task, statics
}

// decodeDriver returns the task's driver, or "" if it is missing or unknown.
func (d *decoder) decodeDriver(a *hcl.Attribute, task *hcl.Block, where string) string {
	known := strings.Join(drivers(), ", ")
	if a == nil {
		d.errorf(task.DefRange, "Missing driver",
			`%s has no driver; add driver = "exec" (one of: %s)`, where, known)
		return ""
	}
	driver, ok := d.stringAttr(a)
	if !ok {
		return ""
	}
	if _, found := driverConfigFields[driver]; !found {
		d.errorf(a.Expr.Range(), "Unknown driver", "unknown driver %q;%s use one of: %s",
			driver, didYouMean(driver, drivers()), known)
		return ""
	}
	return driver
}

// decodePorts appends the ports of blocks to task.Ports and returns the
// static ones.
func (d *decoder) decodePorts(task *Task, blocks []*hcl.Block) []staticPort {
	var statics []staticPort
	labelAt := map[string]hcl.Range{}
	for _, b := range blocks {
		label, labelRange := b.Labels[0], b.LabelRanges[0]
		valid := d.check(labelRange, "Invalid port label", checkPortLabel(label))
		if prev, dup := labelAt[label]; dup && valid {
			d.errorf(labelRange, "Duplicate port",
				"port %q is already defined at %s; port labels must be unique within a task", label, posString(prev))
			valid = false
		}
		content := d.content(b.Body, portSchema, fmt.Sprintf("port %q", label))
		if !valid {
			continue
		}
		labelAt[label] = labelRange
		port := Port{Label: label}
		if a := content.Attributes["static"]; a != nil {
			if n, ok := d.intAttr(a, 1, maxPort); ok {
				port.Static = n
				statics = append(statics, staticPort{port: n, label: label, rng: a.Expr.Range()})
			}
		}
		task.Ports = append(task.Ports, port)
	}
	return statics
}

// decodeEnv decodes the env block; values may reference vars.
func (d *decoder) decodeEnv(block *hcl.Block, vars []string) map[string]string {
	attrs, diags := block.Body.JustAttributes()
	d.addHCL(diags)
	if len(attrs) == 0 {
		return nil
	}
	env := make(map[string]string, len(attrs))
	for name, a := range attrs {
		if !d.check(a.NameRange, "Invalid environment variable", checkEnvKey(name)) {
			continue
		}
		if s, ok := d.interpolatedString(a.Expr, "env "+name, vars); ok {
			env[name] = s
		}
	}
	return env
}

// decodeRestart decodes a restart block over the defaults.
func (d *decoder) decodeRestart(block *hcl.Block) RestartPolicy {
	p := defaultRestartPolicy()
	attrs := d.content(block.Body, restartSchema, "restart").Attributes
	valid := true
	if a := attrs["attempts"]; a != nil {
		n, ok := d.intAttr(a, 0, maxAttempts)
		if ok {
			p.Attempts = n
		}
		valid = ok
	}
	if a := attrs["interval"]; a != nil {
		interval, ok := d.durationAttr(a)
		if ok && interval == 0 {
			d.errorf(a.Expr.Range(), "Invalid duration", `interval must be greater than 0, e.g. "30m"`)
			ok = false
		}
		if ok {
			p.Interval = interval
		}
		valid = valid && ok
	}
	if a := attrs["delay"]; a != nil {
		delay, ok := d.durationAttr(a)
		if ok {
			p.Delay = delay
		}
		valid = valid && ok
	}
	if a := attrs["mode"]; a != nil {
		mode, ok := d.stringAttr(a)
		modes := []string{RestartModeFail, RestartModeDelay}
		switch {
		case !ok:
		case mode == RestartModeFail || mode == RestartModeDelay:
			p.Mode = mode
		default:
			d.errorf(a.Expr.Range(), "Invalid restart mode",
				`unknown restart mode %q;%s use "fail" (give up after the attempts) or "delay" (wait for the interval to pass, then restart again)`,
				mode, didYouMean(mode, modes))
		}
	}
	if valid && p.Attempts > 0 && p.Delay > 0 && int64(p.Attempts) > int64(p.Interval/p.Delay) {
		d.errorf(block.DefRange, "Invalid restart policy",
			"attempts × delay (%d × %s) exceeds interval (%s), so the restarts cannot happen within the interval; lower attempts or delay, or raise interval",
			p.Attempts, p.Delay, p.Interval)
	}
	return p
}

// decodeKill decodes kill_signal and kill_timeout into task.
func (d *decoder) decodeKill(task *Task, attrs hcl.Attributes) {
	if a := attrs["kill_signal"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			sig, err := canonicalSignal(s)
			if d.check(a.Expr.Range(), "Invalid signal", err) {
				task.KillSignal = sig
			}
		}
	}
	if a := attrs["kill_timeout"]; a != nil {
		timeout, ok := d.durationAttr(a)
		switch {
		case !ok:
		case timeout == 0 || timeout > maxKillTimeout:
			d.errorf(a.Expr.Range(), "Invalid duration",
				`kill_timeout must be greater than 0 and at most 1h, e.g. "10s" or "1m30s"; got %s`, timeout)
		default:
			task.KillTimeout = timeout
		}
	}
}

// defaultRestartPolicy returns Nomad's default restart policy.
func defaultRestartPolicy() RestartPolicy {
	return RestartPolicy{
		Attempts: defaultRestartAttempts,
		Interval: defaultRestartInterval,
		Delay:    defaultRestartDelay,
		Mode:     RestartModeFail,
	}
}

// blocksOfType returns the blocks of the given type.
func blocksOfType(blocks hcl.Blocks, typ string) []*hcl.Block {
	var out []*hcl.Block
	for _, b := range blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

// single returns the only block of the given type, or nil; every further
// one is reported.
func (d *decoder) single(blocks hcl.Blocks, typ, where string) *hcl.Block {
	found := blocksOfType(blocks, typ)
	if len(found) == 0 {
		return nil
	}
	for _, b := range found[1:] {
		d.errorf(b.DefRange, "Duplicate block",
			"%s has more than one %s block; the first is at %s; merge them into one",
			where, typ, posString(found[0].DefRange))
	}
	return found[0]
}

// posString formats the start of rng as "file:line:col".
func posString(rng hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", rng.Filename, rng.Start.Line, rng.Start.Column)
}
