// Package consulbridge keeps the local Consul agent in step with the task
// instances systemd runs. Each instance's services are registered while its
// unit is up, and the health of their TTL checks follows the unit state,
// pushed on each D-Bus event, not polled. http and tcp checks are Consul's
// own; script checks run as short transient units in the task's context and
// are pushed the same way. check_restart restarts a task through the
// supervisor after too many critical results in a row.
//
// Consul never gates a task: every change is queued per service and retried
// with backoff, and a periodic anti-entropy pass (also run after Consul comes
// back) diffs the agent's services and checks against what is wanted. The
// bridge owns only the services whose IDs carry its prefix and node identity
// (and Meta["external-source"] = "unitvisor"); everything else in Consul is
// left alone.
//
// In steady state the bridge makes two Consul calls per sync interval (list
// services, list checks), whatever the number of tasks. For that, TTL checks
// get a long TTL (see CheckTTL) and are only updated when a state changes.
package consulbridge
