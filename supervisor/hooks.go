package supervisor

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// StopHook is told before the supervisor stops a task instance, and may
// hold the stop up: the Consul bridge deregisters the instance's services
// and waits the task's shutdown_delay. It must not wait on anything that
// can be down for long (Consul), and must return when ctx ends.
type StopHook interface {
	BeforeStop(ctx context.Context, job, task string, index int)
}

// Instance is a task instance a live job wants, as subscribers (the
// Consul bridge) see it.
type Instance struct {
	Job   *jobspec.Job
	Task  *jobspec.Task
	Index int
	Unit  string
	Ports map[string]int    // as assigned; empty before the first start
	Vars  map[string]string // the UNITVISOR_* values, for interpolation
	State units.State       // the watcher's last state of the unit
	Live  bool              // the unit is loaded
}

func (s *Supervisor) beforeStop(ctx context.Context, unit string) {
	if s.cfg.StopHook == nil {
		return
	}
	job, task, index, err := s.cfg.Namer.Parse(unit)
	if err != nil {
		return
	}
	s.cfg.StopHook.BeforeStop(ctx, job, task, index)
}

// Instance returns one instance; ok is false when no live job wants it.
func (s *Supervisor) Instance(job, task string, index int) (Instance, bool, error) {
	rec, ok, err := s.store.Job(job)
	if err != nil || !ok || rec.Stopped {
		return Instance{}, false, err
	}
	t := findTask(rec.Job, task)
	if t == nil || index < 0 || index >= t.Count {
		return Instance{}, false, nil
	}
	name, err := s.cfg.Namer.Name(job, task, index)
	if err != nil {
		return Instance{}, false, err
	}
	ur, _, err := s.store.Unit(name)
	if err != nil {
		return Instance{}, false, err
	}
	return s.instanceOf(rec.Job, t, index, name, ur), true, nil
}

// Instances returns every instance that live jobs want.
func (s *Supervisor) Instances() ([]Instance, error) {
	jobs, err := s.store.Jobs()
	if err != nil {
		return nil, err
	}
	recs, err := s.recordMap()
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, j := range jobs {
		if j.Stopped {
			continue
		}
		for _, t := range j.Job.Tasks {
			for i := 0; i < t.Count; i++ {
				name, err := s.cfg.Namer.Name(j.Job.Name, t.Name, i)
				if err != nil {
					continue
				}
				out = append(out, s.instanceOf(j.Job, t, i, name, recs[name]))
			}
		}
	}
	return out, nil
}

func (s *Supervisor) instanceOf(job *jobspec.Job, t *jobspec.Task, index int, unit string, ur UnitRecord) Instance {
	st, live := s.states.Get(unit)
	ports := ur.Ports
	if ur.Final != nil {
		ports = nil
	}
	dir := s.taskDir(job.Name, t.Name, index)
	return Instance{
		Job: job, Task: t, Index: index, Unit: unit, Ports: ports,
		Vars:  jobspec.VarsFor(job, t, index, dir, unit, ports),
		State: st, Live: live,
	}
}

// InstanceSpec returns the spec of the unit an instance runs as: its
// user, environment, directory and isolation, for running a command in
// the task's context (script checks).
func (s *Supervisor) InstanceSpec(ctx context.Context, job, task string, index int) (units.Spec, error) {
	rec, ok, err := s.store.Job(job)
	if err != nil {
		return units.Spec{}, err
	}
	var t *jobspec.Task
	if ok && !rec.Stopped {
		t = findTask(rec.Job, task)
	}
	if t == nil || index < 0 || index >= t.Count {
		return units.Spec{}, fmt.Errorf("job %s task %s instance %d: %w", job, task, index, ErrNotFound)
	}
	name, err := s.cfg.Namer.Name(job, task, index)
	if err != nil {
		return units.Spec{}, err
	}
	ur, _, err := s.store.Unit(name)
	if err != nil {
		return units.Spec{}, err
	}
	ur.Unit = name
	spec, _, err := s.prepare(ctx, ur, want{job: rec.Job, task: t, index: index, hash: TaskHash(job, t)})
	return spec, err
}

// RestartTask restarts a running instance now (check_restart): the stop
// hook is told, the unit stopped within the task's kill_timeout and
// started again with the same ports.
func (s *Supervisor) RestartTask(ctx context.Context, job, task string, index int, reason string) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	rec, ok, err := s.store.Job(job)
	if err != nil {
		return err
	}
	var t *jobspec.Task
	if ok && !rec.Stopped {
		t = findTask(rec.Job, task)
	}
	if t == nil || index < 0 || index >= t.Count {
		return fmt.Errorf("restart job %s task %s instance %d: %w", job, task, index, ErrNotFound)
	}
	name, err := s.cfg.Namer.Name(job, task, index)
	if err != nil {
		return err
	}
	ur, known, err := s.store.Unit(name)
	if err != nil {
		return err
	}
	s.log.Info("restarting unit", "unit", name, "reason", reason)
	s.beforeStop(ctx, name)
	if err := s.sd.Stop(ctx, name, drivers.StopWait(t)); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	if !known {
		// Never started by this agent: the next reconcile starts it.
		s.Kick()
		return nil
	}
	err = s.start(ctx, ur, want{job: rec.Job, task: t, index: index, hash: ur.Hash})
	s.mu.Lock()
	if err != nil {
		s.errs[name] = err.Error()
	} else {
		delete(s.errs, name)
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

// Unit returns one unit record.
func (s *Store) Unit(name string) (UnitRecord, bool, error) {
	var rec UnitRecord
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketUnits).Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &rec)
	})
	if err != nil {
		return rec, false, fmt.Errorf("read unit %s: %w", name, err)
	}
	return rec, found, nil
}
