package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

// UsageReader reads the accounting of one unit's cgroup in one batch
// (units.Cgroups does it from cgroupfs).
type UsageReader interface {
	Usage(cgroup string) (units.Usage, error)
}

// Config is what the metrics need from the agent.
type Config struct {
	Slice         string        // the units' slice, for their cgroup paths
	Usage         UsageReader   // nil: no usage series
	UsageInterval time.Duration // how often usage is read; default 10s
	// StateFile keeps the restart and OOM kill counters across agent
	// restarts; "" keeps them in memory only.
	StateFile string
	Version   string // the agent's, for unitvisor_build_info
}

// Metrics holds what /metrics serves. Feed it task events (Run), the
// supervisor's reconciles (Reconciled), D-Bus calls (it is a
// units.Observer) and Consul operations (ConsulOp, QueueDepth).
type Metrics struct {
	cfg Config
	log *slog.Logger
	// reg has the collectors gathered on every scrape (agent, Consul, Go,
	// process); perTask the task and job ones, encoded when they change.
	reg, perTask *prometheus.Registry

	agent  *agentCollector
	consul *consulCollector

	mu    sync.RWMutex
	insts map[key]*instance
	jobs  []*job // desired, from the last reconcile; nil before the first
	// stoppedJobs counts the jobs kept stopped in the store.
	stoppedJobs int
	dirty       bool   // counters changed since the state file was written
	version     uint64 // bumped on every change to what perTask exposes

	changed chan struct{} // pokes Run to encode perTask ahead of scrapes
	encoded encoded
}

// key identifies a task instance; it outlives the units that run it.
type key struct {
	job, task string
	index     int
}

// instance is what is known of one task instance.
type instance struct {
	labels  []string // job, task, instance, driver; set while desired
	desired bool

	unit  string      // its unit, once an event named it
	live  bool        // the unit is loaded
	state units.State // the unit's last state, while live

	usage    units.Usage
	hasUsage bool // usage was read from the unit's current cgroup

	restarts  counter // NRestarts of its units
	oomEvents counter // OOM kills the watcher saw (units.State.OOMKills)
	oomCgroup counter // oom_kill of its cgroups
	exit      int     // last exit code (128+n for signal n)
	hasExit   bool
}

// job is a desired job and its desired instances, in order.
type job struct {
	name      string
	instances []*instance
}

// New returns the metrics of an agent; call Run to feed them.
func New(cfg Config, log *slog.Logger) *Metrics {
	if cfg.UsageInterval <= 0 {
		cfg.UsageInterval = 10 * time.Second
	}
	m := &Metrics{
		cfg: cfg, log: log,
		reg:     prometheus.NewRegistry(),
		perTask: prometheus.NewRegistry(),
		agent:   newAgentCollector(cfg.Version),
		consul:  newConsulCollector(),
		insts:   map[key]*instance{},
		changed: make(chan struct{}, 1),
	}
	if err := m.load(); err != nil {
		log.Warn("metrics: counters start from the units' own values", "err", err)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.agent, m.consul,
	)
	m.perTask.MustRegister(newTaskCollector(m), newJobCollector(m))
	return m
}

// Run follows task events, reads usage on its timer and writes the state
// file until ctx ends. events is a supervisor subscription.
func (m *Metrics) Run(ctx context.Context, events <-chan supervisor.TaskEvent) {
	if m.cfg.Usage != nil {
		go m.usageLoop(ctx)
	}
	flush := time.NewTicker(time.Second)
	defer flush.Stop()
	var encode <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			m.flush()
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			m.Observe(ev)
		case <-m.changed:
			// Encode ahead of the next scrape, at most once a second:
			// changes come in bursts (a job's thousand units starting),
			// and a scrape meanwhile encodes what it needs itself.
			if encode == nil {
				encode = time.After(time.Second)
			}
		case <-encode:
			encode = nil
			m.perTaskText()
		case <-flush.C:
			m.flush()
		}
	}
}

// bump records a change to what perTask exposes; m.mu is held.
func (m *Metrics) bump() {
	m.version++
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Observe takes in one task event.
func (m *Metrics) Observe(ev supervisor.TaskEvent) {
	m.agent.watcherEvents.Inc()
	k := key{ev.Job, ev.Task, ev.Index}
	st := ev.State
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.insts[k]
	if in == nil {
		in = &instance{}
		m.insts[k] = in
	}
	in.unit = st.Name
	m.bump()
	if st.Gone {
		// The counters keep what the unit counted: a new unit starts
		// from zero and is added on top.
		in.live, in.state, in.hasUsage = false, units.State{}, false
		return
	}
	in.live, in.state = true, st
	if !hasCgroup(st) {
		in.hasUsage = false // it went with the cgroup
	}
	changed := in.restarts.observe(uint64(st.NRestarts))
	changed = in.oomEvents.observe(uint64(st.OOMKills)) || changed
	if code, ok := exitCode(st); ok && (!in.hasExit || in.exit != code) {
		in.exit, in.hasExit, changed = code, true, true
	}
	m.dirty = m.dirty || changed
}

// hasCgroup reports whether systemd keeps a cgroup for a unit in state st
// (it removes it when the unit becomes inactive or failed).
func hasCgroup(st units.State) bool {
	return st.ActiveState != "inactive" && st.ActiveState != "failed"
}

// exitCode is how the main process last ended, as a shell reports it.
func exitCode(st units.State) (int, bool) {
	switch st.ExecMainCode {
	case units.CodeExited:
		return int(st.ExecMainStatus), true
	case units.CodeKilled, units.CodeDumped:
		return 128 + int(st.ExecMainStatus), true
	}
	return 0, false
}

// Reconciled is the supervisor's Config.Reconciled hook: it times the
// reconcile and takes the desired state from the job records.
func (m *Metrics) Reconciled(took time.Duration, records []supervisor.JobRecord, ok bool) {
	m.agent.reconcile.Observe(took.Seconds())
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range m.insts {
		in.desired = false
	}
	jobs := make([]*job, 0, len(records))
	stopped := 0
	for _, rec := range records {
		if rec.Stopped {
			stopped++
			continue
		}
		j := &job{name: rec.Job.Name}
		for _, t := range rec.Job.Tasks {
			for i := range t.Count {
				k := key{rec.Job.Name, t.Name, i}
				in := m.insts[k]
				if in == nil {
					in = &instance{}
					m.insts[k] = in
				}
				in.desired = true
				if len(in.labels) == 0 || in.labels[3] != t.Driver {
					in.labels = []string{rec.Job.Name, t.Name, strconv.Itoa(i), t.Driver}
				}
				j.instances = append(j.instances, in)
			}
		}
		jobs = append(jobs, j)
	}
	// Instances nobody wants and without a unit are forgotten, with their
	// counters: a job run again later starts new series.
	for k, in := range m.insts {
		if !in.desired && !in.live {
			delete(m.insts, k)
			m.dirty = true
		}
	}
	m.jobs, m.stoppedJobs = jobs, stopped
	m.bump()
}

// DBusCall implements units.Observer.
func (m *Metrics) DBusCall(method string, d time.Duration, err error) {
	m.agent.dbusCall.WithLabelValues(method).Observe(d.Seconds())
	if err != nil {
		m.agent.dbusErrors.WithLabelValues(method).Inc()
	}
}

// DBusReconnect implements units.Observer.
func (m *Metrics) DBusReconnect(connection string) {
	m.agent.dbusReconnects.WithLabelValues(connection).Inc()
}

// ConsulOp reports one Consul operation ("register", "deregister",
// "check_update", "sync"), how long it took and whether it failed.
func (m *Metrics) ConsulOp(op string, d time.Duration, err error) {
	m.consul.ops.WithLabelValues(op).Inc()
	m.consul.duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.consul.errors.WithLabelValues(op).Inc()
	}
}

// QueueDepth reports how many Consul operations wait to be sent.
func (m *Metrics) QueueDepth(n int) { m.consul.queue.Set(float64(n)) }

// Serve serves Handler on ln until ctx ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	// The agent may close the listener itself on its way out.
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !(ctx.Err() != nil && errors.Is(err, net.ErrClosed)) {
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	}
	return nil
}

type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) { e.log.Error("metrics: " + fmt.Sprint(v...)) }

// counter turns a source that starts again from zero (the NRestarts of a
// new unit, the oom_kill count of a new cgroup) into a counter that never
// goes down: when the source falls, what it had counted moves to Base.
type counter struct {
	Base uint64 `json:"base"`
	Last uint64 `json:"last"`
}

// observe takes a reading of the source; it reports whether it changed.
func (c *counter) observe(v uint64) bool {
	if v == c.Last {
		return false
	}
	if v < c.Last {
		c.Base += c.Last
	}
	c.Last = v
	return true
}

func (c counter) value() float64 { return float64(c.Base + c.Last) }
