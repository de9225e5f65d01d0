package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unitvisor/unitvisor/supervisor"
)

// taskLabels are the labels of every per-instance series. Prometheus
// renames job and instance to exported_job and exported_instance on
// ingestion (they collide with its target labels) unless honor_labels is
// set; README says how to query them.
var taskLabels = []string{"job", "task", "instance", "driver"}

// taskStates are the values of unitvisor_task_state's state label, as
// `unitvisor job status` shows them; pending means no unit yet.
var taskStates = []string{
	supervisor.StatusPending, supervisor.StatusStarting, supervisor.StatusRunning,
	supervisor.StatusRestarting, supervisor.StatusComplete, supervisor.StatusFailed,
	supervisor.StatusStopping, supervisor.StatusDead,
}

// taskCollector exposes each desired task instance.
type taskCollector struct {
	m *Metrics

	state, restarts, exit, started, mem, memLimit, cpu, tasks, oom *prometheus.Desc
}

func newTaskCollector(m *Metrics) *taskCollector {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc("unitvisor_task_"+name, help, append(append([]string{}, taskLabels...), extra...), nil)
	}
	return &taskCollector{
		m:        m,
		state:    d("state", "Whether the task instance is in this state (1) or not (0); pending: it has no unit yet.", "state"),
		restarts: d("restarts_total", "Restarts of the task instance by systemd (NRestarts), summed over the units that ran it."),
		exit:     d("last_exit_code", "How the instance's main process last ended: its exit status, or 128+N for signal N."),
		started:  d("start_time_seconds", "When the instance's unit last became active, in seconds since the epoch."),
		mem:      d("memory_bytes", "Memory in use by the instance's cgroup, read every usage_interval."),
		memLimit: d("memory_limit_bytes", "Hard memory limit of the instance's cgroup; 0: unlimited."),
		cpu:      d("cpu_seconds_total", "CPU time used by the instance's cgroup; starts again from 0 when its unit restarts."),
		tasks:    d("kernel_tasks", "Processes and threads in the instance's cgroup (systemd's TasksCurrent)."),
		oom:      d("oom_kills_total", "Processes of the instance killed by the kernel's OOM killer."),
	}
}

func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.restarts, c.exit, c.started, c.mem, c.memLimit, c.cpu, c.tasks, c.oom} {
		ch <- d
	}
}

func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	gauge, count := prometheus.GaugeValue, prometheus.CounterValue
	for _, j := range c.m.jobs {
		for _, in := range j.instances {
			l := in.labels
			status := in.status()
			for _, s := range taskStates {
				v := 0.0
				if s == status {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(c.state, gauge, v, l[0], l[1], l[2], l[3], s)
			}
			ch <- prometheus.MustNewConstMetric(c.restarts, count, in.restarts.value(), l...)
			// Both sources miss kills: the watcher's count lives in the
			// agent's memory and sees none on hosts without a notifier,
			// the cgroup's dies with the cgroup, often before the next
			// reading. Each is a lower bound; the larger is the better.
			ch <- prometheus.MustNewConstMetric(c.oom, count, max(in.oomEvents.value(), in.oomCgroup.value()), l...)
			if in.hasExit {
				ch <- prometheus.MustNewConstMetric(c.exit, gauge, float64(in.exit), l...)
			}
			if in.live && !in.state.ActiveSince.IsZero() {
				ch <- prometheus.MustNewConstMetric(c.started, gauge, float64(in.state.ActiveSince.UnixMicro())/1e6, l...)
			}
			if in.hasUsage {
				u := in.usage
				ch <- prometheus.MustNewConstMetric(c.mem, gauge, float64(u.MemoryBytes), l...)
				ch <- prometheus.MustNewConstMetric(c.memLimit, gauge, float64(u.MemoryLimitBytes), l...)
				ch <- prometheus.MustNewConstMetric(c.cpu, count, float64(u.CPUNanos)/1e9, l...)
				ch <- prometheus.MustNewConstMetric(c.tasks, gauge, float64(u.Tasks), l...)
			}
		}
	}
}

// status is the instance's state as `unitvisor job status` names it.
func (in *instance) status() string {
	if !in.live {
		return supervisor.StatusPending
	}
	return supervisor.Summarize(in.state)
}
