package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unitvisor/unitvisor/units"
)

// agentCollector exposes the agent's own workings.
type agentCollector struct {
	reconcile      prometheus.Histogram
	dbusCall       *prometheus.HistogramVec
	dbusErrors     *prometheus.CounterVec
	dbusReconnects *prometheus.CounterVec
	watcherEvents  prometheus.Counter
	usageRefresh   prometheus.Gauge
	buildInfo      prometheus.Gauge
}

func newAgentCollector(version string) *agentCollector {
	c := &agentCollector{
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "unitvisor_reconcile_duration_seconds",
			Help: "How long a reconcile of desired jobs with systemd took (starts and stops included).",
			// From "nothing to do" (well under 1ms) to starting a
			// thousand units (tens of seconds).
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120},
		}),
		dbusCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "unitvisor_dbus_call_duration_seconds",
			Help:    "Duration of D-Bus method calls to systemd, by method.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"method"}),
		dbusErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unitvisor_dbus_call_errors_total",
			Help: "D-Bus method calls to systemd that returned an error, by method.",
		}, []string{"method"}),
		dbusReconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "unitvisor_dbus_reconnects_total",
			Help: "New system bus connections after a lost one (a daemon-reexec drops all): calls is the method call connection, signals the watcher's.",
		}, []string{"connection"}),
		watcherEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "unitvisor_watcher_events_total",
			Help: "Unit state changes of task units received from the watcher.",
		}),
		usageRefresh: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "unitvisor_usage_refresh_duration_seconds",
			Help: "How long the last reading of all tasks' cgroup accounting took.",
		}),
		buildInfo: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "unitvisor_build_info",
			Help:        "The agent's version, as a label; always 1.",
			ConstLabels: prometheus.Labels{"version": version},
		}),
	}
	// Series exist from the start, so rate() and absent() work before the
	// first call of a kind.
	for _, m := range units.Methods() {
		c.dbusCall.WithLabelValues(m)
		c.dbusErrors.WithLabelValues(m)
	}
	c.dbusReconnects.WithLabelValues("calls")
	c.dbusReconnects.WithLabelValues("signals")
	c.buildInfo.Set(1)
	return c
}

func (c *agentCollector) metrics() []prometheus.Collector {
	return []prometheus.Collector{c.reconcile, c.dbusCall, c.dbusErrors, c.dbusReconnects, c.watcherEvents, c.usageRefresh, c.buildInfo}
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		m.Describe(ch)
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics() {
		m.Collect(ch)
	}
}
