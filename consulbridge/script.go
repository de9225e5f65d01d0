package consulbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/units"
)

// runner runs one script check of one instance every interval.
type runner struct {
	sc     scriptCheck
	cancel context.CancelFunc
}

// syncRunners starts the script checks of an instance whose unit runs and
// stops the others. Callers hold b.mu.
func (b *Bridge) syncRunners(inst *instance, scripts []scriptCheck) {
	want := map[string]scriptCheck{}
	if inst.in.State.Running() && b.ctx != nil {
		for _, sc := range scripts {
			want[sc.id] = sc
		}
	}
	for id, r := range inst.scripts {
		sc, ok := want[id]
		if ok && sameScript(sc, r.sc) {
			continue
		}
		r.cancel()
		delete(inst.scripts, id)
		delete(inst.results, id)
	}
	for id, sc := range want {
		if inst.scripts[id] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(b.ctx)
		r := &runner{sc: sc, cancel: cancel}
		inst.scripts[id] = r
		go b.runScripts(ctx, inst.key, r)
	}
}

func sameScript(a, b scriptCheck) bool {
	return slices.Equal(a.argv, b.argv) && a.check.Interval == b.check.Interval && a.check.Timeout == b.check.Timeout
}

// runScripts runs a script check now and then every interval, until ctx
// ends, and pushes each result through the check's TTL.
func (b *Bridge) runScripts(ctx context.Context, k instKey, r *runner) {
	name := checkUnitName(b.cfg.UnitPrefix, k, r.sc.id)
	// A unit left over by an agent that died during a run.
	_ = b.sd.Stop(ctx, name, 5*time.Second)
	for {
		h := b.runScript(ctx, k, r.sc, name)
		if ctx.Err() != nil {
			return
		}
		b.scriptResult(k, r, h)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.sc.check.Interval):
		}
	}
}

// scriptResult records a script check result and updates the check.
func (b *Bridge) scriptResult(k instKey, r *runner, h health) {
	b.mu.Lock()
	defer b.mu.Unlock()
	inst := b.insts[k]
	if inst == nil || inst.scripts[r.sc.id] != r {
		return // stopped meanwhile
	}
	inst.results[r.sc.id] = h
	b.recompute(inst)
	b.observe(inst, r.sc.id, h.Status, time.Now())
}

// runScript runs a script check once as a transient unit with the task's
// user, environment, directory and isolation, and returns its result:
// exit 0 passing, 1 warning, anything else (or a timeout) critical; the
// output (stdout and stderr) cut to 4 KiB.
func (b *Bridge) runScript(ctx context.Context, k instKey, sc scriptCheck, name string) health {
	b.mu.Lock()
	tasks := b.tasks
	b.mu.Unlock()
	task, err := tasks.InstanceSpec(ctx, k.job, k.task, k.index)
	if err != nil {
		return health{api.HealthCritical, "script check not run: " + err.Error()}
	}
	dir := filepath.Join(b.cfg.DataDir, "checks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return health{api.HealthCritical, "script check not run: " + err.Error()}
	}
	out := filepath.Join(dir, strings.TrimSuffix(name, ".service")+".out")
	_ = os.Remove(out)
	desc := fmt.Sprintf("unitvisor script check %s of job %s task %s instance %d", sc.check.Name, k.job, k.task, k.index)
	spec := scriptSpec(task, name, desc, sc.argv, sc.check.Timeout, out)
	startErr := b.sd.Start(ctx, spec, sc.check.Timeout+30*time.Second)
	st, fetchErr := b.sd.Fetch(ctx, name)
	if err := b.sd.Stop(context.WithoutCancel(ctx), name, 5*time.Second); err != nil {
		b.log.Debug("stop script check unit", "unit", name, "err", err)
	}
	output := readOutput(out)
	_ = os.Remove(out)
	return scriptHealth(st, errors.Join(startErr, fetchErr), fetchErr == nil, output, sc.check.Timeout)
}

// scriptHealth turns the final state of a script check's unit into a
// result. ran is false when the unit's state could not be read.
func scriptHealth(st units.State, err error, ran bool, output string, timeout time.Duration) health {
	h := health{Status: api.HealthCritical}
	switch {
	case !ran || st.ExecMainCode == 0 && st.Result != "timeout":
		msg := "script check did not run"
		if err != nil {
			msg += ": " + err.Error()
		}
		return health{api.HealthCritical, cut(joinOutput(output, msg))}
	case st.Result == "timeout":
		return health{api.HealthCritical, cut(joinOutput(output, fmt.Sprintf("timed out after %s", timeout)))}
	case st.ExecMainCode == units.CodeExited && st.ExecMainStatus == 0:
		h.Status = api.HealthPassing
	case st.ExecMainCode == units.CodeExited && st.ExecMainStatus == 1:
		h.Status = api.HealthWarning
	}
	if strings.TrimSpace(output) == "" {
		output = st.Exit()
	}
	h.Output = cut(output)
	return h
}

func joinOutput(output, msg string) string {
	if strings.TrimSpace(output) == "" {
		return msg
	}
	return strings.TrimRight(output, "\n") + "\n(" + msg + ")"
}

// readOutput reads at most maxOutput bytes of a script's output.
func readOutput(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxOutput+4))
	return string(b)
}

// scriptDropped are the task unit's properties a script check unit does
// not take over: what the task runs, and how it restarts, stops and logs.
// It keeps the rest: user, environment, working directory, slice,
// isolation and resource limits. (For a container task that is the host
// side of the task: the script does not run inside the container.)
var scriptDropped = map[string]bool{
	"Description": true, "ExecStart": true, "ExecStartEx": true, "Type": true,
	"ExecStartPre": true, "ExecStartPreEx": true, "ExecStartPost": true, "ExecStartPostEx": true,
	"ExecStop": true, "ExecStopEx": true, "ExecStopPost": true, "ExecStopPostEx": true,
	"ExecReload": true, "ExecReloadEx": true, "ExecCondition": true, "ExecConditionEx": true,
	"RemainAfterExit": true, "Restart": true, "RestartUSec": true,
	"StartLimitIntervalUSec": true, "StartLimitBurst": true, "KillSignal": true,
	"TimeoutStartUSec": true, "TimeoutStopUSec": true, "RuntimeMaxUSec": true,
	"SendSIGKILL": true, "StandardInput": true, "StandardOutput": true, "StandardError": true,
}

// scriptSpec is the unit of one script check run, derived from the task's
// own unit spec: a oneshot that stays loaded (so its exit status can be
// read) and writes stdout and stderr to out.
func scriptSpec(task units.Spec, name, desc string, argv []string, timeout time.Duration, out string) units.Spec {
	var props []units.Property
	for _, p := range task.Properties {
		if !scriptDropped[p.Name] {
			props = append(props, p)
		}
	}
	props = append(props,
		units.String("Description", desc),
		units.ExecStart(argv),
		units.String("Type", "oneshot"),
		units.Bool("RemainAfterExit", true),
		units.USec("TimeoutStartUSec", timeout),
		units.USec("TimeoutStopUSec", time.Second),
		units.Bool("SendSIGKILL", true),
		units.String("StandardOutputFileToAppend", out),
		units.String("StandardErrorFileToAppend", out),
	)
	return units.Spec{Name: name, Properties: props}
}

// checkUnitName names the unit of a script check:
// <prefix>-check-<job>-<task>-<index>-<service>-<check>.service, escaped
// like task units (so "-" only separates), or with a hash when too long.
// It has no "@", so the task watcher and reconcile never take it for a
// task.
func checkUnitName(prefix string, k instKey, checkID string) string {
	parts := strings.Split(checkID, ":") // unitvisor:node:job:task:index:service:check
	svc, chk := parts[len(parts)-2], parts[len(parts)-1]
	name := prefix + "-check-" + units.Escape(k.job) + "-" + units.Escape(k.task) + "-" + strconv.Itoa(k.index) +
		"-" + units.Escape(svc) + "-" + units.Escape(chk) + ".service"
	if len(name) <= units.MaxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(checkID))
	return prefix + "-check-" + hex.EncodeToString(sum[:12]) + ".service"
}
