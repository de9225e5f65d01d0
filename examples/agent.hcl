# Agent configuration for the demo (see README for every setting).
data_dir  = "/var/lib/unitvisor"
socket    = "/run/unitvisor/unitvisor.sock"
log_level = "info"

ports {
  min = 20000
  max = 32000
}

driver "exec" { enabled = true }
driver "raw_exec" { enabled = false }

# Prometheus /metrics, on loopback unless exposed on purpose.
metrics {
  address        = "127.0.0.1:17100"
  usage_interval = "10s"
}
