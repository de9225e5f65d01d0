# An example job: two instances of Python's HTTP server, each on its own
# dynamic port, as the unprivileged user "nobody" with systemd's isolation.
job "web" {
  task "api" {
    driver = "exec"
    count  = 2
    config {
      command = "/usr/bin/python3"
      args    = ["-m", "http.server", "--bind", "127.0.0.1", "${UNITVISOR_PORT_http}"]
    }
    env {
      GREETING = "hello from ${UNITVISOR_TASK} instance ${UNITVISOR_INDEX}"
    }
    port "http" {}
    restart {
      attempts = 3
      interval = "5m"
      delay    = "5s"
      mode     = "fail"
    }
    kill_signal  = "SIGTERM"
    kill_timeout = "10s"
  }
}
