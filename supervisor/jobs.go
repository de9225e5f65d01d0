package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// InvalidError is a job the agent refuses; its lines say what to fix.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string { return strings.Join(e.Problems, "\n") }

// SubmitResult tells what a submission changes.
type SubmitResult struct {
	Job     string            `json:"job"`
	Version uint64            `json:"version"`
	Tasks   map[string]string `json:"tasks"` // task -> created, replaced, unchanged, scaled, removed
}

// Submit parses and checks a job file, stores it and asks for a reconcile.
// Nothing that runs is touched when the file is invalid.
func (s *Supervisor) Submit(_ context.Context, file string, src []byte) (SubmitResult, error) {
	job, err := jobspec.Parse(file, src)
	if err != nil {
		var ds jobspec.Diagnostics
		if errors.As(err, &ds) {
			lines := make([]string, len(ds))
			for i, d := range ds {
				lines[i] = d.String()
			}
			return SubmitResult{}, &InvalidError{Problems: lines}
		}
		return SubmitResult{}, &InvalidError{Problems: []string{err.Error()}}
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	jobs, err := s.store.Jobs()
	if err != nil {
		return SubmitResult{}, err
	}
	if problems := s.check(file, job, jobs); len(problems) > 0 {
		return SubmitResult{}, &InvalidError{Problems: problems}
	}
	old, existed, err := s.store.Job(job.Name)
	if err != nil {
		return SubmitResult{}, err
	}
	rec := JobRecord{Job: job, File: file, Source: string(src), Version: 1, Submitted: time.Now().UTC()}
	if existed {
		rec.Version = old.Version + 1
	}
	if err := s.store.PutJob(rec); err != nil {
		return SubmitResult{}, err
	}
	s.Kick()
	return SubmitResult{Job: job.Name, Version: rec.Version, Tasks: diffTasks(old, existed, job)}, nil
}

// check is what only the agent can know: enabled drivers, unit name
// length with this agent's prefix, static ports other jobs hold.
func (s *Supervisor) check(file string, job *jobspec.Job, jobs []JobRecord) []string {
	var problems []string
	bad := func(task, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: task %q: %s", file, task, fmt.Sprintf(format, args...)))
	}
	badAt := func(t *jobspec.Task, path, format string, args ...any) {
		problems = append(problems, problemAt(file, t, path, format, args...))
	}
	taken := map[int]string{}
	for _, j := range jobs {
		if j.Stopped || j.Job.Name == job.Name {
			continue
		}
		for _, t := range j.Job.Tasks {
			for _, p := range t.Ports {
				if p.Static > 0 {
					taken[p.Static] = fmt.Sprintf("job %q task %q", j.Job.Name, t.Name)
				}
			}
		}
	}
	for _, t := range job.Tasks {
		d, ok := s.cfg.Drivers[t.Driver]
		if !ok {
			badAt(t, "driver", "driver %q is not enabled on this agent: enable it in the agent config (driver %q { enabled = true })", t.Driver, t.Driver)
		}
		if c, ok := d.(Checker); ok {
			if field, err := c.Check(t); err != nil {
				badAt(t, field, "%v", err)
			}
		}
		problems = append(problems, s.checkResources(file, t)...)
		if _, err := s.cfg.Namer.Name(job.Name, t.Name, t.Count-1); err != nil {
			bad(t.Name, "%v", err)
		}
		for _, p := range t.Ports {
			if owner, ok := taken[p.Static]; ok && p.Static > 0 {
				bad(t.Name, "static port %d (%s) is already used by %s: pick another port or use a dynamic one", p.Static, p.Label, owner)
			}
		}
	}
	return append(problems, s.checkCapacity(file, job, jobs)...)
}

// problemAt formats a problem at an attribute of the task as
// "file:line:col: task "x": ...", falling back to the file name.
func problemAt(file string, t *jobspec.Task, path, format string, args ...any) string {
	at := t.At(path)
	if at == "" {
		at = file
	}
	return fmt.Sprintf("%s: task %q: %s", at, t.Name, fmt.Sprintf(format, args...))
}

// checkResources refuses what this machine or its systemd cannot enforce:
// CPUs it lacks, devices it lacks, properties newer than its systemd.
func (s *Supervisor) checkResources(file string, t *jobspec.Task) []string {
	r := t.Resources
	if r == nil {
		return nil
	}
	var problems []string
	if n := s.cfg.Node; len(n.CPUs) > 0 {
		for _, c := range jobspec.CPUs(r.CPUSet) {
			if !slices.Contains(n.CPUs, c) {
				problems = append(problems, problemAt(file, t, "resources.cpuset",
					"cpuset %q names CPU %d, but this machine's CPUs are %s: name CPUs it has", r.CPUSet, c, cpuList(n.CPUs)))
				break
			}
		}
	}
	res, err := drivers.Resources(r, r.CPUSet)
	if err != nil {
		return append(problems, problemAt(file, t, "resources.devices", "%v", err))
	}
	props, err := units.ResourceProperties(res)
	if err == nil {
		err = units.CheckVersion(s.sd.Version(), props)
	}
	if err != nil {
		problems = append(problems, problemAt(file, t, "", "resources: %v; this host's systemd cannot enforce it: remove that resource", err))
	}
	return problems
}

// checkCapacity refuses a job whose memory reservations or dedicated cores
// do not fit next to the other jobs'.
func (s *Supervisor) checkCapacity(file string, job *jobspec.Job, jobs []JobRecord) []string {
	n := s.cfg.Node
	if n.MemoryMB == 0 {
		return nil
	}
	var problems []string
	usedMB, usedCores := 0, 0
	for _, j := range jobs {
		if j.Stopped || j.Job.Name == job.Name {
			continue
		}
		usedMB += jobMemoryMB(j.Job)
		for _, t := range j.Job.Tasks {
			if t.Resources != nil {
				usedCores += t.Resources.Cores * t.Count
			}
		}
	}
	needMB, needCores := jobMemoryMB(job), 0
	var memTask, coreTask *jobspec.Task
	for _, t := range job.Tasks {
		if t.Resources == nil {
			continue
		}
		if t.Resources.MemoryMB > 0 && memTask == nil {
			memTask = t
		}
		if t.Resources.Cores > 0 {
			needCores += t.Resources.Cores * t.Count
			if coreTask == nil {
				coreTask = t
			}
		}
	}
	if free := n.MemoryMB - usedMB; needMB > free {
		problems = append(problems, problemAt(file, memTask, "resources.memory",
			"job %q needs %d MiB of memory for its instances, but only %d MiB are free (%d MiB for tasks on this machine, %d MiB held by other jobs): lower memory or count, or stop another job",
			job.Name, needMB, max(free, 0), n.MemoryMB, usedMB))
	}
	if free := len(n.freeCores(nil)) - usedCores; needCores > free {
		problems = append(problems, problemAt(file, coreTask, "resources.cores",
			"job %q needs %d dedicated cores, but only %d are free: lower cores or count, or stop another job", job.Name, needCores, max(free, 0)))
	}
	return problems
}

func diffTasks(old JobRecord, existed bool, job *jobspec.Job) map[string]string {
	out := map[string]string{}
	for _, t := range job.Tasks {
		var prev *jobspec.Task
		if existed && !old.Stopped {
			prev = findTask(old.Job, t.Name)
		}
		switch {
		case prev == nil:
			out[t.Name] = "created"
		case TaskHash(old.Job.Name, prev) != TaskHash(job.Name, t):
			out[t.Name] = "replaced"
		case prev.Count != t.Count:
			out[t.Name] = "scaled"
		default:
			out[t.Name] = "unchanged"
		}
	}
	if existed && !old.Stopped {
		for _, t := range old.Job.Tasks {
			if findTask(job, t.Name) == nil {
				out[t.Name] = "removed"
			}
		}
	}
	return out
}

// StopJob stops every unit of a job (each within its kill_timeout, ending
// in SIGKILL) and keeps the final states for status; purge also forgets
// the job and removes its task directories.
func (s *Supervisor) StopJob(ctx context.Context, name string, purge bool) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	rec, ok, err := s.store.Job(name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w %q", ErrNotFound, name)
	}
	rec.Stopped = true
	if err := s.store.PutJob(rec); err != nil {
		return err
	}
	// The reconcile that follows tells observers (metrics) the job is
	// stopped; it finds nothing left to do.
	s.Kick()
	recs, err := s.store.Units()
	if err != nil {
		return err
	}
	var mine []UnitRecord
	for _, r := range recs {
		if r.Job == name {
			mine = append(mine, r)
		}
	}
	errs := make([]error, len(mine))
	idx := map[string]int{}
	names := make([]string, len(mine))
	for i, r := range mine {
		idx[r.Unit], names[i] = i, r.Unit
	}
	s.parallel(names, func(unit string) {
		i := idx[unit]
		r := mine[i]
		wait := 10 * time.Second
		if t := findTask(rec.Job, r.Task); t != nil {
			wait = drivers.StopWait(t)
		}
		last, seen := s.states.Get(unit)
		s.beforeStop(ctx, unit)
		if err := s.sd.Stop(ctx, unit, wait); err != nil {
			errs[i] = err
			return
		}
		if seen {
			final := last
			final.ActiveState, final.SubState, final.MainPID = "inactive", "dead", 0
			r.Final = &final
		} else if r.Final == nil {
			r.Final = &units.State{Name: unit, ActiveState: "inactive", SubState: "dead"}
		}
		if !purge {
			errs[i] = s.store.PutUnit(r)
		}
	})
	s.mu.Lock()
	for _, r := range mine {
		delete(s.retryAt, r.Unit)
		delete(s.errs, r.Unit)
		delete(s.waiting, r.Unit)
	}
	s.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop job %s: %w", name, err)
	}
	if purge {
		if err := s.store.DeleteJob(name); err != nil {
			return err
		}
		os.RemoveAll(filepath.Join(s.cfg.DataDir, "tasks", name))
	}
	return nil
}

// Status returns one job's status.
func (s *Supervisor) Status(name string) (JobStatus, error) {
	rec, ok, err := s.store.Job(name)
	if err != nil {
		return JobStatus{}, err
	}
	if !ok {
		return JobStatus{}, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	recs, err := s.recordMap()
	if err != nil {
		return JobStatus{}, err
	}
	return s.status(rec, recs), nil
}

// List returns the status of every job, by name.
func (s *Supervisor) List() ([]JobStatus, error) {
	jobs, err := s.store.Jobs()
	if err != nil {
		return nil, err
	}
	recs, err := s.recordMap()
	if err != nil {
		return nil, err
	}
	out := make([]JobStatus, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.status(j, recs))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

func (s *Supervisor) status(rec JobRecord, recs map[string]UnitRecord) JobStatus {
	js := JobStatus{Name: rec.Job.Name, Version: rec.Version, Stopped: rec.Stopped, Submitted: rec.Submitted}
	hashes := map[string]string{}
	for _, t := range rec.Job.Tasks {
		hashes[t.Name] = TaskHash(rec.Job.Name, t)
		for i := 0; i < t.Count; i++ {
			name, err := s.cfg.Namer.Name(rec.Job.Name, t.Name, i)
			if err != nil {
				continue
			}
			js.Instances = append(js.Instances, s.instance(rec, t, i, name, recs[name], hashes[t.Name]))
		}
	}
	return js
}

func (s *Supervisor) instance(rec JobRecord, t *jobspec.Task, i int, name string, ur UnitRecord, hash string) InstanceStatus {
	is := InstanceStatus{Task: t.Name, Index: i, Driver: t.Driver, Unit: name, Ports: ur.Ports, Status: StatusPending}
	s.mu.Lock()
	startErr, retry := s.errs[name], s.retryAt[name]
	progress := s.waiting[name]
	s.mu.Unlock()
	st, live := s.states.Get(name)
	switch {
	case rec.Stopped && ur.Final != nil:
		final := *ur.Final
		is.State = &final
		is.Status, is.Detail = StatusDead, final.Exit()
		if live {
			is.State = &st
			is.Status, is.Detail = summarize(st)
		}
		return is
	case live && ur.Hash == hash:
		is.State = &st
		is.Status, is.Detail = summarize(st)
		if s.cfg.Usage != nil && st.ActiveState == "active" {
			if u, ok := s.cfg.Usage(name); ok {
				is.Usage = &u
			}
		}
	case live:
		is.Status, is.Detail = StatusPending, "replacing the unit of an older definition"
	}
	if startErr != "" && (!live || is.Status != StatusRunning) {
		is.Status, is.Detail = StatusError, startErr
	}
	if progress != nil && !live {
		is.Status, is.Detail = StatusPending, progress()
	}
	if !retry.IsZero() {
		is.RetryAt = retry
		is.Detail = strings.TrimPrefix(is.Detail+"; restart mode delay: starting again at "+retry.Format(time.RFC3339), "; ")
	}
	return is
}
