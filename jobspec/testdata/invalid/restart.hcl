job "web" {
  task "a" {
    driver = "exec"
    config { command = "/bin/true" }
    restart {
      attempts = -1
      interval = "5 minutes"
      delay    = "-5s"
      mode     = "never"
    }
  }
  task "b" {
    driver = "exec"
    config { command = "/bin/true" }
    restart {
      attempts = 10
      interval = "1m"
      delay    = "10s"
    }
  }
  task "c" {
    driver = "exec"
    config { command = "/bin/true" }
    restart {
      interval = "0s"
      delay    = 5
    }
  }
}
