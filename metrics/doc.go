// Package metrics owns the agent's Prometheus endpoint: per task instance
// state, restarts, last exit code, start time and resource usage; desired
// and running instances per job; and the agent's own internals (reconcile
// and D-Bus call durations, D-Bus reconnects, watcher events, Consul sync,
// jobs), plus the Go and process collectors.
//
// A scrape is served from memory and makes no D-Bus call and no store
// read. Unit state comes from the supervisor's task events (the watcher's
// signals), desired state from the job records each reconcile hands over,
// and cgroup accounting from a timer that reads each task's cgroup once per
// interval (units.Cgroups), never per scrape.
//
// Counters are honest across agent restarts: the restart and OOM kill
// counters of an instance are kept in a small state file beside the store,
// so they neither start again from zero when the agent restarts nor go
// backwards when a unit is replaced (its NRestarts starts from zero).
//
// Each collector has its own file: tasks.go (per instance), jobs.go (per
// job), agent.go (internals), consul.go (Consul sync).
package metrics
