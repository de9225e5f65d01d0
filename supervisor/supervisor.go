// Package supervisor owns desired state: the jobs in the agent's store, the
// reconcile loop that makes systemd run what they ask for, task state and
// the restart mode systemd lacks (Nomad's "delay"), port allocation, and
// the agent's HTTP API. It talks to systemd only through the small
// interfaces declared here.
package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// Systemd starts and stops units.
type Systemd interface {
	Start(ctx context.Context, spec units.Spec, timeout time.Duration) error
	Stop(ctx context.Context, name string, wait time.Duration) error
	ResetFailed(ctx context.Context, name string) error
	Version() int // the manager's major version; 0 if unknown
}

// UnitStates is the watcher's cache of our units' states.
type UnitStates interface {
	Get(name string) (units.State, bool)
	Snapshot() []units.State
}

// Driver turns a task instance into a unit spec.
type Driver interface {
	Name() string
	Prepare(ctx context.Context, in drivers.Instance) (units.Spec, error)
}

// Checker is a driver that can refuse a task at submit because this
// machine cannot run it (no JVM, an image outside the allowed paths...);
// field names the attribute at fault ("config.jar_path"), "" for the task.
type Checker interface {
	Check(t *jobspec.Task) (field string, err error)
}

// Config is what the supervisor needs from the agent's configuration.
type Config struct {
	DataDir        string
	Namer          units.Namer
	Slice          string
	Ports          PortRange
	Drivers        map[string]Driver // the enabled ones
	ReconcileEvery time.Duration     // periodic full reconcile; default 30s
	StartTimeout   time.Duration     // per start job; default 30s
	Parallel       int               // concurrent unit starts/stops; default 16
	// StopHook, if set, is told before every stop of a task instance.
	StopHook StopHook
	// Reconciled, if set, is called after every reconcile with how long it
	// took and, when ok (they could be read), the job records it worked
	// from, so metrics keeps desired state without reading the store.
	Reconciled func(took time.Duration, jobs []JobRecord, ok bool)
	Node       Node // capacity; zero: not checked
	// Usage, if set, reads a unit's accounting for status (cgroupfs).
	Usage func(unit string) (units.Usage, bool)
	// Launcher is the agent's binary, for command lines that must not sit
	// in a unit file (see drivers.Command).
	Launcher string
	// Heartbeat, if set, is called from Run's loop every HeartbeatEvery
	// (default 10s) once the agent is ready, and while a reconcile or stop
	// waits on systemd: the systemd watchdog ping. A loop stuck elsewhere
	// misses its beats.
	Heartbeat      func()
	HeartbeatEvery time.Duration
}

// TaskEvent is a unit state change of one task instance.
type TaskEvent struct {
	Job   string      `json:"job"`
	Task  string      `json:"task"`
	Index int         `json:"index"`
	State units.State `json:"state"`
}

// Supervisor reconciles desired jobs with systemd.
type Supervisor struct {
	cfg    Config
	log    *slog.Logger
	store  *Store
	sd     Systemd
	states UnitStates

	opMu  sync.Mutex // one reconcile or stop at a time
	kick  chan struct{}
	ready atomic.Bool // Run has called ready

	mu      sync.Mutex
	errs    map[string]string        // unit -> last start error
	waiting map[string]func() string // unit -> progress of what its driver fetches
	retryAt map[string]time.Time     // unit -> when delay mode starts it again
	subs    []chan TaskEvent
}

// New returns a supervisor; call Run to start reconciling.
func New(cfg Config, store *Store, sd Systemd, states UnitStates, log *slog.Logger) *Supervisor {
	if cfg.ReconcileEvery == 0 {
		cfg.ReconcileEvery = 30 * time.Second
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 16
	}
	return &Supervisor{
		cfg: cfg, log: log, store: store, sd: sd, states: states,
		kick:    make(chan struct{}, 1),
		errs:    map[string]string{},
		waiting: map[string]func() string{},
		retryAt: map[string]time.Time{},
	}
}

// Subscribe returns a channel of task events, for consulbridge and metrics.
func (s *Supervisor) Subscribe(buf int) <-chan TaskEvent {
	ch := make(chan TaskEvent, buf)
	s.mu.Lock()
	s.subs = append(s.subs, ch)
	s.mu.Unlock()
	return ch
}

// Kick asks for a reconcile soon.
func (s *Supervisor) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run follows unit events, reconciles once (adopting, reaping and
// starting), calls ready, then reconciles on every kick and period until
// ctx ends.
func (s *Supervisor) Run(ctx context.Context, events <-chan units.Event, ready func()) error {
	// Events are followed on their own goroutine: a long reconcile (stops
	// wait up to kill_timeout) must not hold them up.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				s.onEvent(ctx, ev)
			}
		}
	}()
	if err := s.reconcile(ctx); err != nil {
		return fmt.Errorf("first reconcile: %w", err)
	}
	if ready != nil {
		ready()
	}
	s.ready.Store(true)
	tick := time.NewTicker(s.cfg.ReconcileEvery)
	defer tick.Stop()
	var beat <-chan time.Time // nil: never
	if s.cfg.Heartbeat != nil {
		t := time.NewTicker(s.heartbeatEvery())
		defer t.Stop()
		beat = t.C
		s.cfg.Heartbeat()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			s.reconcileLogged(ctx)
		case <-tick.C:
			s.reconcileLogged(ctx)
		case <-beat:
			s.cfg.Heartbeat()
		}
	}
}

func (s *Supervisor) reconcileLogged(ctx context.Context) {
	if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("reconcile", "err", err)
	}
}

func (s *Supervisor) onEvent(ctx context.Context, ev units.Event) {
	job, task, index, err := s.cfg.Namer.Parse(ev.Name)
	if err != nil {
		return
	}
	s.publish(ctx, TaskEvent{Job: job, Task: task, Index: index, State: ev.State})
	if !ev.Failed() {
		return
	}
	// Nomad's mode "delay": systemd gave up (attempts within interval
	// used); wait out the interval, then start it again.
	rec, ok, err := s.store.Job(job)
	if err != nil || !ok || rec.Stopped {
		return
	}
	t := findTask(rec.Job, task)
	if t == nil || t.Restart.Mode != jobspec.RestartModeDelay || index >= t.Count {
		return
	}
	s.scheduleRetry(ev.Name, ev.State, t.Restart.Interval)
}

func (s *Supervisor) scheduleRetry(unit string, st units.State, interval time.Duration) {
	since := st.StateSince
	if since.IsZero() {
		since = time.Now()
	}
	at := since.Add(interval)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.retryAt[unit]; ok {
		return
	}
	s.retryAt[unit] = at
	s.log.Info("task failed; restart mode delay: starting it again later", "unit", unit, "at", at.Format(time.RFC3339))
	time.AfterFunc(time.Until(at), s.Kick)
}

func (s *Supervisor) publish(ctx context.Context, ev TaskEvent) {
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	}
}

func findTask(j *jobspec.Job, name string) *jobspec.Task {
	for _, t := range j.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// TaskHash identifies a task's definition: a unit whose recorded hash
// differs runs an old definition and is replaced.
// The count is left out: scaling adds or removes instances, it does not
// change the ones that stay.
func TaskHash(job string, t *jobspec.Task) string {
	def := *t
	def.Count = 0
	// Services and the shutdown delay are the Consul bridge's business:
	// changing them must not restart the task.
	def.Services, def.ShutdownDelay = nil, 0
	b, _ := json.Marshal(struct {
		Job  string
		Task jobspec.Task
	}{job, def})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// want is one desired task instance.
type want struct {
	job   *jobspec.Job
	task  *jobspec.Task
	index int
	hash  string
}

func (s *Supervisor) desired(jobs []JobRecord) (map[string]want, error) {
	out := map[string]want{}
	for _, rec := range jobs {
		if rec.Stopped {
			continue
		}
		for _, t := range rec.Job.Tasks {
			h := TaskHash(rec.Job.Name, t)
			for i := 0; i < t.Count; i++ {
				name, err := s.cfg.Namer.Name(rec.Job.Name, t.Name, i)
				if err != nil {
					return nil, err
				}
				out[name] = want{job: rec.Job, task: t, index: i, hash: h}
			}
		}
	}
	return out, nil
}

// reconcile makes systemd match the store: units nobody wants are stopped,
// units that run an old definition are replaced, missing units started,
// failed units in delay mode started again when their time has come.
// Units that match (by name and recorded task hash) are left alone, which
// is how an agent restart adopts running tasks without touching them.
func (s *Supervisor) reconcile(ctx context.Context) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	began := time.Now()
	var nStart, nStop int
	var jobs []JobRecord
	read := false
	defer func() {
		took := time.Since(began)
		if nStart+nStop > 0 {
			s.log.Info("reconciled", "started", nStart, "stopped", nStop, "took", took)
		}
		if s.cfg.Reconciled != nil {
			s.cfg.Reconciled(took, jobs, read)
		}
	}()
	jobs, err := s.store.Jobs()
	if err != nil {
		return err
	}
	read = true
	recs, err := s.recordMap()
	if err != nil {
		return err
	}
	wants, err := s.desired(jobs)
	if err != nil {
		return err
	}
	present := map[string]units.State{}
	for _, st := range s.states.Snapshot() {
		present[st.Name] = st
	}

	var stops, starts []string
	for name := range present {
		if _, ok := wants[name]; !ok {
			stops = append(stops, name)
		}
	}
	now := time.Now()
	for name, w := range wants {
		st, running := present[name]
		rec, known := recs[name]
		switch {
		case !running:
			starts = append(starts, name)
		case !known || rec.Hash != w.hash:
			stops = append(stops, name)
			starts = append(starts, name)
		case st.Failed() && w.task.Restart.Mode == jobspec.RestartModeDelay:
			s.mu.Lock()
			at, scheduled := s.retryAt[name]
			s.mu.Unlock()
			if !scheduled {
				s.scheduleRetry(name, st, w.task.Restart.Interval)
			} else if !now.Before(at) {
				starts = append(starts, name)
			}
		}
	}
	sort.Strings(stops)
	sort.Strings(starts)
	nStart, nStop = len(starts), len(stops)
	s.parallel(stops, func(name string) {
		wait := 10 * time.Second
		if w, ok := wants[name]; ok {
			wait = drivers.StopWait(w.task)
		} else if rec, ok := recs[name]; ok {
			if t := s.taskOf(jobs, rec.Job, rec.Task); t != nil {
				wait = drivers.StopWait(t)
			}
		}
		s.log.Info("stopping unit", "unit", name, "reason", stopReason(wants, name))
		s.beforeStop(ctx, name)
		if err := s.sd.Stop(ctx, name, wait); err != nil {
			s.log.Error("stop unit", "unit", name, "err", err)
			return
		}
		if _, ok := wants[name]; !ok {
			s.forgetUnit(jobs, recs[name])
		}
	})
	// Record every instance before starting any (one transaction), so a
	// crash in between is adopted, not duplicated.
	used := usedPorts(jobs, recs)
	held := heldCPUs(recs)
	next := make(map[string]UnitRecord, len(starts))
	portErrs := map[string]error{}
	batch := make([]UnitRecord, 0, len(starts))
	for _, name := range starts {
		rec, err := s.assign(name, wants[name], recs[name], used, held)
		if err != nil {
			portErrs[name] = err
			continue
		}
		next[name] = rec
		batch = append(batch, rec)
	}
	if err := s.store.PutUnits(batch); err != nil {
		return err
	}
	s.parallel(starts, func(name string) {
		s.mu.Lock()
		delete(s.retryAt, name)
		s.mu.Unlock()
		err := portErrs[name]
		if err == nil {
			err = s.start(ctx, next[name], wants[name])
		}
		if err = s.noteStart(ctx, name, err); err != nil {
			s.log.Error("start task", "unit", name, "err", err)
		}
	})
	return nil
}

func stopReason(wants map[string]want, name string) string {
	if _, ok := wants[name]; ok {
		return "definition changed"
	}
	return "no job wants it"
}

func (s *Supervisor) taskOf(jobs []JobRecord, job, task string) *jobspec.Task {
	for _, j := range jobs {
		if j.Job.Name == job {
			return findTask(j.Job, task)
		}
	}
	return nil
}

// forgetUnit drops the record of a unit nobody wants, unless its job is
// stopped (then the record keeps the final state for status), and removes
// its task directory when the instance is no longer part of a live job.
func (s *Supervisor) forgetUnit(jobs []JobRecord, rec UnitRecord) {
	if rec.Unit == "" {
		return
	}
	for _, j := range jobs {
		if j.Job.Name == rec.Job && j.Stopped {
			return
		}
	}
	if err := s.store.DeleteUnit(rec.Unit); err != nil {
		s.log.Error("forget unit", "unit", rec.Unit, "err", err)
	}
	os.RemoveAll(s.taskDir(rec.Job, rec.Task, rec.Index))
}

// parallel runs fn for every name, at most cfg.Parallel at once. While it
// waits it keeps the watchdog fed: a reconcile or job stop waiting on stop
// jobs (up to kill_timeout each) is busy, not stuck.
func (s *Supervisor) parallel(names []string, fn func(string)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sem := make(chan struct{}, s.cfg.Parallel)
		var wg sync.WaitGroup
		for _, n := range names {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				fn(n)
			}()
		}
		wg.Wait()
	}()
	if s.cfg.Heartbeat == nil || !s.ready.Load() {
		<-done
		return
	}
	t := time.NewTicker(s.heartbeatEvery())
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.cfg.Heartbeat()
		}
	}
}

func (s *Supervisor) heartbeatEvery() time.Duration {
	if s.cfg.HeartbeatEvery > 0 {
		return s.cfg.HeartbeatEvery
	}
	return 10 * time.Second
}

func (s *Supervisor) recordMap() (map[string]UnitRecord, error) {
	recs, err := s.store.Units()
	if err != nil {
		return nil, err
	}
	m := make(map[string]UnitRecord, len(recs))
	for _, r := range recs {
		m[r.Unit] = r
	}
	return m, nil
}

func usedPorts(jobs []JobRecord, recs map[string]UnitRecord) map[int]bool {
	used := map[int]bool{}
	for _, j := range jobs {
		if j.Stopped {
			continue
		}
		for _, t := range j.Job.Tasks {
			for _, p := range t.Ports {
				if p.Static > 0 {
					used[p.Static] = true
				}
			}
		}
	}
	for _, r := range recs {
		if r.Final != nil {
			continue
		}
		for _, p := range r.Ports {
			used[p] = true
		}
	}
	return used
}

func heldCPUs(recs map[string]UnitRecord) map[int]bool {
	held := map[int]bool{}
	for _, r := range recs {
		if r.Final == nil {
			for _, c := range jobspec.CPUs(r.CPUs) {
				held[c] = true
			}
		}
	}
	return held
}

// assign gives the instance its ports and dedicated cores: static ports
// as declared, dynamic ports and cores kept from its previous unit when it
// had them, else new ones.
func (s *Supervisor) assign(name string, w want, old UnitRecord, used map[int]bool, held map[int]bool) (UnitRecord, error) {
	rec := UnitRecord{Unit: name, Job: w.job.Name, Task: w.task.Name, Index: w.index, Hash: w.hash, Ports: map[string]int{}}
	if r := w.task.Resources; r != nil && r.Cores > 0 {
		if prev := jobspec.CPUs(old.CPUs); old.Final == nil && len(prev) == r.Cores {
			rec.CPUs = old.CPUs
		} else {
			for _, c := range prev {
				delete(held, c)
			}
			free := s.cfg.Node.freeCores(held)
			if len(free) < r.Cores {
				return rec, fmt.Errorf("cores: %d wanted, %d free on this machine", r.Cores, len(free))
			}
			for _, c := range free[:r.Cores] {
				held[c] = true
			}
			rec.CPUs = cpuList(free[:r.Cores])
		}
	}
	for _, p := range w.task.Ports {
		switch {
		case p.Static > 0:
			rec.Ports[p.Label] = p.Static
		case old.Ports[p.Label] > 0 && old.Final == nil:
			rec.Ports[p.Label] = old.Ports[p.Label]
		default:
			port, err := s.cfg.Ports.allocate(used)
			if err != nil {
				return rec, err
			}
			rec.Ports[p.Label] = port
		}
	}
	return rec, nil
}

func (s *Supervisor) taskDir(job, task string, index int) string {
	return filepath.Join(s.cfg.DataDir, "tasks", job, task, fmt.Sprint(index))
}

// start prepares the instance with its driver and starts its unit.
func (s *Supervisor) start(ctx context.Context, rec UnitRecord, w want) error {
	spec, _, err := s.prepare(ctx, rec, w)
	if err != nil {
		return err
	}
	if argv, ok := spec.Get("ExecStart"); ok {
		s.log.Info("starting unit", "unit", rec.Unit, "exec", argv)
	}
	return s.sd.Start(ctx, spec, s.cfg.StartTimeout)
}

// prepare turns an instance into the spec of its unit with its driver.
func (s *Supervisor) prepare(ctx context.Context, rec UnitRecord, w want) (units.Spec, drivers.Instance, error) {
	d, ok := s.cfg.Drivers[w.task.Driver]
	if !ok {
		return units.Spec{}, drivers.Instance{}, fmt.Errorf("driver %q is not enabled on this agent", w.task.Driver)
	}
	dir := s.taskDir(w.job.Name, w.task.Name, w.index)
	if r := w.task.Resources; r != nil && r.CPUSet != "" {
		rec.CPUs = r.CPUSet
	}
	in := drivers.Instance{
		Job: w.job, Task: w.task, Index: w.index, Unit: rec.Unit, Slice: s.cfg.Slice,
		TaskDir: dir, Ports: rec.Ports, CPUs: rec.CPUs, Launcher: s.cfg.Launcher,
		Vars: jobspec.VarsFor(w.job, w.task, w.index, dir, rec.Unit, rec.Ports),
	}
	spec, err := d.Prepare(ctx, in)
	if err != nil {
		return units.Spec{}, in, fmt.Errorf("prepare %s: %w", rec.Unit, err)
	}
	return spec, in, nil
}

// ErrNotFound is returned for a job the agent does not have.
var ErrNotFound = errors.New("no such job")
