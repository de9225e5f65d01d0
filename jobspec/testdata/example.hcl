job "web" {
  task "api" {
    driver = "exec"            # or "raw_exec"
    count  = 2                 # instances 0 and 1; default 1
    config {
      command = "/usr/bin/python3"
      args    = ["-m", "http.server", "${UNITVISOR_PORT_http}"]
    }
    env { GREETING = "hello from ${UNITVISOR_TASK}" }
    port "http" {}             # dynamic, from the agent's port range; or static = 8080
    user = "nobody"
    restart {
      attempts = 3
      interval = "5m"
      delay    = "5s"
      mode     = "fail"        # or "delay"
    }
    kill_signal  = "SIGTERM"
    kill_timeout = "10s"
  }
}
