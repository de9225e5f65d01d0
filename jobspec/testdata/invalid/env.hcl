job "web" {
  task "api" {
    driver = "exec"
    config { command = "/bin/true" }
    env {
      GOOD      = "ok"
      _ALSO_OK  = "ok"
      BAD-NAME  = "x"
      UNITVISOR_PORT = "x"
      lower_case = "fine"
    }
    env {
      SECOND = "block"
    }
  }
}
