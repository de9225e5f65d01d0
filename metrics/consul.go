package metrics

import "github.com/prometheus/client_golang/prometheus"

// consulOps are the operations consulbridge reports.
var consulOps = []string{"register", "deregister", "check_update", "sync"}

// consulCollector exposes the Consul sync, fed by consulbridge through
// ConsulOp and QueueDepth. Without Consul its series stay at zero.
type consulCollector struct {
	ops, errors *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	queue       prometheus.Gauge
}

func newConsulCollector() *consulCollector {
	c := &consulCollector{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unitvisor_consul_operations_total",
			Help: "Operations sent to the local Consul agent, by kind (sync: a full anti-entropy pass).",
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unitvisor_consul_errors_total",
			Help: "Operations sent to the local Consul agent that failed (they are retried), by kind.",
		}, []string{"op"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "unitvisor_consul_operation_duration_seconds",
			Help:    "Duration of operations sent to the local Consul agent, by kind.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"op"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "unitvisor_consul_queue_depth",
			Help: "Consul operations waiting to be sent.",
		}),
	}
	for _, op := range consulOps {
		c.ops.WithLabelValues(op)
		c.errors.WithLabelValues(op)
		c.duration.WithLabelValues(op)
	}
	return c
}

func (c *consulCollector) Describe(ch chan<- *prometheus.Desc) {
	c.ops.Describe(ch)
	c.errors.Describe(ch)
	c.duration.Describe(ch)
	c.queue.Describe(ch)
}

func (c *consulCollector) Collect(ch chan<- prometheus.Metric) {
	c.ops.Collect(ch)
	c.errors.Collect(ch)
	c.duration.Collect(ch)
	c.queue.Collect(ch)
}
