# unitvisor agent configuration (HCL), read by unitvisor.service.
# Commented settings show the built-in defaults; the README describes every
# setting. After a change: systemctl restart unitvisor (running tasks are
# adopted, not restarted).

# data_dir  = "/var/lib/unitvisor"             # store (state.db), task directories
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
# job author may run anything on this machine. java and qemu are on, and
# refuse tasks where no JVM or qemu is installed.
driver "exec" { enabled = true }
driver "raw_exec" { enabled = false }
# driver "qemu" {
#   enabled       = true
#   allowed_paths = ["/var/lib/unitvisor/images"]   # VM images must be below these
# }

# Kept for the system: tasks' memory reservations must fit in the rest.
# reserved {
#   memory = 256   # MiB
#   cores  = 0
# }

# Prometheus metrics (/metrics), on loopback only.
metrics {
  address        = "127.0.0.1:17100"
  usage_interval = "10s"
}

# Services and health checks in the local Consul agent. Without this block
# there is no Consul bridge; tasks never wait for Consul either way.
# consul {
#   address = "127.0.0.1:8500"
#   # token_file = "/etc/unitvisor/consul.token"
# }
