# unitvisor agent configuration (HCL), read by unitvisor.service.
# Commented settings show the built-in defaults; unitvisor(1) and the README
# describe them. After a change: systemctl restart unitvisor (running tasks
# are adopted, not restarted).

# data_dir  = "/var/lib/unitvisor"             # store (state.db) and task directories
# socket    = "/run/unitvisor/unitvisor.sock"  # API for the unitvisor CLI (root only)
log_level = "info"

# Tasks run as <unit_prefix>-<job>-<task>@<index>.service in this slice.
# Purging the package stops the units of the default prefix "uv" only.
# unit_prefix = "uv"
# slice       = "unitvisor.slice"

# Dynamic ports are taken from this range.
ports {
  min = 20000
  max = 32000
}

# exec: a non-root user with systemd's sandboxing. raw_exec runs commands as
# given, as root by default, with no isolation: enable it only where every
# job author may run anything on this machine.
driver "exec" { enabled = true }
driver "raw_exec" { enabled = false }

# Not read by this version of the agent; kept here, commented, as the place
# for them:
#
# Prometheus metrics, on loopback only.
# metrics {
#   address = "127.0.0.1:9947"
# }
#
# Service registration in the local Consul agent.
# consul {
#   address = "127.0.0.1:8500"
# }
