package consulbridge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

// Consul is the part of the local Consul agent's API the bridge uses.
type Consul interface {
	Register(ctx context.Context, reg *api.AgentServiceRegistration) error
	Deregister(ctx context.Context, id string) error
	UpdateTTL(ctx context.Context, checkID, status, output string) error
	Services(ctx context.Context) (map[string]*api.AgentService, error)
	Checks(ctx context.Context) (map[string]*api.AgentCheck, error)
}

// Tasks is what the bridge needs from the supervisor.
type Tasks interface {
	Instance(job, task string, index int) (supervisor.Instance, bool, error)
	Instances() ([]supervisor.Instance, error)
	InstanceSpec(ctx context.Context, job, task string, index int) (units.Spec, error)
	RestartTask(ctx context.Context, job, task string, index int, reason string) error
}

// Systemd runs script checks as transient units.
type Systemd interface {
	Start(ctx context.Context, spec units.Spec, timeout time.Duration) error
	Fetch(ctx context.Context, name string) (units.State, error)
	Stop(ctx context.Context, name string, wait time.Duration) error
}

// Observer is told about every Consul call (op is "register",
// "deregister", "check_update" or "sync", the anti-entropy listing) and
// about the number of services waiting for a Consul write.
type Observer interface {
	ConsulOp(op string, d time.Duration, err error)
	QueueDepth(n int)
}

// Config is the bridge's configuration.
type Config struct {
	Node         string        // node identity, see NodeID
	SyncInterval time.Duration // anti-entropy period; default 30s
	// Probation is how long after start the anti-entropy pass leaves
	// services alone that it owns but does not (yet) want, so tasks
	// adopted after an agent restart are not reaped while their state
	// comes in. Default: SyncInterval.
	Probation  time.Duration
	UnitPrefix string // script check units are <prefix>-check-...
	DataDir    string // script check output passes through DataDir/checks
	Workers    int    // concurrent Consul writes; default 4
	// DeregisterWait bounds how long a stopping task waits for the
	// deregistration of its services; default 2s. Consul never holds a
	// stop up for longer.
	DeregisterWait time.Duration
}

// Bridge keeps Consul in step with the supervisor's task instances.
type Bridge struct {
	cfg     Config
	consul  Consul
	sd      Systemd
	obs     Observer
	log     *slog.Logger
	started time.Time

	wake     chan struct{} // work was queued
	syncKick chan struct{} // run the anti-entropy pass now
	pollKick chan struct{} // the set of polled checks changed

	mu      sync.Mutex
	tasks   Tasks           // set by Run
	ctx     context.Context // Run's, for script runners and restarts
	insts   map[instKey]*instance
	entries map[string]*entry
	queue   []string
	queued  map[string]bool
	depth   int             // entries that need a Consul write
	down    bool            // Consul unreachable
	pause   time.Time       // while down: no call before
	backoff time.Duration   // of pause
	remote  map[string]bool // owned service IDs at the last sync
}

type instKey struct {
	job, task string
	index     int
}

// instance is what the bridge knows of one task instance.
type instance struct {
	key        instKey
	in         supervisor.Instance
	wanted     bool      // a live job wants it
	stoppingAt time.Time // BeforeStop was called; see registered
	unit       health    // what its TTL checks show
	holding    bool      // a state is held back (see setState)
	seq        int       // of state changes, for the hold
	ids        []string  // its services as now wanted
	results    map[string]health
	scripts    map[string]*runner
	restarts   map[string]*restartState
}

// New returns a bridge; Run starts it. obs may be nil.
func New(cfg Config, consul Consul, sd Systemd, obs Observer, log *slog.Logger) *Bridge {
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 30 * time.Second
	}
	if cfg.Probation <= 0 {
		cfg.Probation = cfg.SyncInterval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.DeregisterWait <= 0 {
		cfg.DeregisterWait = 2 * time.Second
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Bridge{
		cfg: cfg, consul: consul, sd: sd, obs: obs, log: log, started: time.Now(),
		wake:     make(chan struct{}, 1),
		syncKick: make(chan struct{}, 1),
		pollKick: make(chan struct{}, 1),
		insts:    map[instKey]*instance{},
		entries:  map[string]*entry{},
		queued:   map[string]bool{},
		remote:   map[string]bool{},
	}
}

type nopObserver struct{}

func (nopObserver) ConsulOp(string, time.Duration, error) {}
func (nopObserver) QueueDepth(int)                        {}

// Run follows task events until ctx ends: it never blocks on Consul, so
// the supervisor's event stream is drained at the rate it comes.
func (b *Bridge) Run(ctx context.Context, tasks Tasks, events <-chan supervisor.TaskEvent) error {
	b.mu.Lock()
	b.tasks, b.ctx = tasks, ctx
	b.mu.Unlock()
	for range b.cfg.Workers {
		go b.worker(ctx)
	}
	go b.syncLoop(ctx)
	go b.pollLoop(ctx)
	b.log.Info("consul bridge running", "node", b.cfg.Node, "sync_interval", b.cfg.SyncInterval)
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			for _, inst := range b.insts {
				for _, r := range inst.scripts {
					r.cancel()
				}
			}
			b.mu.Unlock()
			return nil
		case ev := <-events:
			b.onEvent(ev)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// onEvent applies a unit state change: the instance's services are
// registered, updated or deregistered, and its TTL checks follow.
func (b *Bridge) onEvent(ev supervisor.TaskEvent) {
	k := instKey{ev.Job, ev.Task, ev.Index}
	in, ok, err := b.tasks.Instance(ev.Job, ev.Task, ev.Index)
	if err != nil {
		b.log.Warn("consul bridge: read task", "job", ev.Job, "task", ev.Task, "index", ev.Index, "err", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	inst := b.insts[k]
	if inst == nil {
		if !ok {
			return
		}
		inst = b.newInstance(k)
	}
	prev := inst.in.State
	if err == nil {
		inst.wanted = ok
		if ok {
			inst.in = in
		}
	}
	inst.in.Live = !ev.State.Gone
	b.setState(inst, prev, ev.State)
	b.recompute(inst)
}

// setState takes a new unit state of an instance and decides the health
// its TTL checks show, holding back a step of a restart (see unitStep).
// Callers hold b.mu.
func (b *Bridge) setState(inst *instance, prev, st units.State) {
	inst.in.State = st
	inst.seq++
	restartOnFailure := inst.in.Task != nil && inst.in.Task.Restart.Attempts > 0
	h, hold := unitStep(prev, st, restartOnFailure)
	if !hold {
		inst.unit, inst.holding = h, false
		return
	}
	inst.holding = true
	seq, k := inst.seq, inst.key
	time.AfterFunc(restartHold, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.insts[k] == inst && inst.seq == seq && inst.holding {
			inst.unit, inst.holding = unitHealth(inst.in.State), false
			b.recompute(inst)
		}
	})
}

func (b *Bridge) newInstance(k instKey) *instance {
	inst := &instance{key: k, results: map[string]health{}, scripts: map[string]*runner{}, restarts: map[string]*restartState{}}
	b.insts[k] = inst
	return inst
}

// recompute derives an instance's services from what is known of it and
// queues the Consul writes that differ. Callers hold b.mu.
func (b *Bridge) recompute(inst *instance) {
	var ds []desired
	var scripts []scriptCheck
	var restarts []restartCheck
	if registered(inst.in, inst.wanted, inst.stoppingAt) {
		ds, scripts, restarts = buildServices(b.cfg.Node, inst.in, inst.unit, inst.results)
	}
	keep := make(map[string]bool, len(ds))
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		keep[d.id] = true
		ids = append(ids, d.id)
		e := b.entry(d.id)
		want := d
		e.want = &want
		b.touch(e)
	}
	for _, id := range inst.ids {
		if e := b.entries[id]; e != nil && !keep[id] {
			e.want = nil
			b.touch(e)
		}
	}
	inst.ids = ids
	b.syncRunners(inst, scripts)
	b.syncRestarts(inst, restarts)
	if !inst.wanted && len(ids) == 0 && len(inst.scripts) == 0 {
		delete(b.insts, inst.key)
	}
}

// BeforeStop deregisters the services of an instance about to be stopped,
// waits (at most DeregisterWait) for Consul to take them away, then waits
// the task's shutdown_delay, so that clients stop using the instance
// before it goes. Implements supervisor.StopHook.
func (b *Bridge) BeforeStop(ctx context.Context, job, task string, index int) {
	k := instKey{job, task, index}
	b.mu.Lock()
	var delay time.Duration
	ids := map[string]bool{}
	if inst := b.insts[k]; inst != nil {
		if len(inst.ids) > 0 && inst.in.Task != nil {
			delay = inst.in.Task.ShutdownDelay
		}
		for _, id := range inst.ids {
			ids[id] = true
		}
		inst.stoppingAt = time.Now()
		b.recompute(inst)
	}
	// What the last sync saw of this instance but is not tracked (left
	// over from before an agent restart).
	prefix := instancePrefix(b.cfg.Node, k)
	for id := range b.remote {
		if strings.HasPrefix(id, prefix) && !ids[id] {
			ids[id] = true
			if e := b.entry(id); e.want == nil {
				b.touch(e)
			}
		}
	}
	var waits []chan struct{}
	for id := range ids {
		if e := b.entries[id]; e != nil && e.dirty {
			ch := make(chan struct{})
			e.waiters = append(e.waiters, ch)
			waits = append(waits, ch)
		}
	}
	b.mu.Unlock()

	timer := time.NewTimer(b.cfg.DeregisterWait)
	defer timer.Stop()
wait:
	for _, ch := range waits {
		select {
		case <-ch:
		case <-timer.C:
			b.log.Warn("consul bridge: deregistration not confirmed, stopping the task anyway", "job", job, "task", task, "index", index)
			break wait
		case <-ctx.Done():
			return
		}
	}
	if delay > 0 {
		b.log.Info("services deregistered, waiting shutdown_delay before stopping", "job", job, "task", task, "index", index, "delay", delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
}
