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
