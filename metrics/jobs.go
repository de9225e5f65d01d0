package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unitvisor/unitvisor/supervisor"
)

// jobCollector exposes desired state per job, from the last reconcile.
// Stopped jobs have no series.
type jobCollector struct {
	m *Metrics

	jobs, desired, running *prometheus.Desc
}

func newJobCollector(m *Metrics) *jobCollector {
	return &jobCollector{
		m:       m,
		jobs:    prometheus.NewDesc("unitvisor_jobs", "Jobs in the agent's store: active ones run, stopped ones are kept for status.", []string{"state"}, nil),
		desired: prometheus.NewDesc("unitvisor_job_desired_instances", "Task instances the job asks for.", []string{"job"}, nil),
		running: prometheus.NewDesc("unitvisor_job_running_instances", "Task instances of the job whose main process is running.", []string{"job"}, nil),
	}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.desired
	ch <- c.running
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	if c.m.jobs == nil {
		return // no reconcile yet: nothing is known
	}
	ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(len(c.m.jobs)), "active")
	ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(c.m.stoppedJobs), "stopped")
	for _, j := range c.m.jobs {
		running := 0
		for _, in := range j.instances {
			if in.status() == supervisor.StatusRunning {
				running++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.desired, prometheus.GaugeValue, float64(len(j.instances)), j.name)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running), j.name)
	}
}
