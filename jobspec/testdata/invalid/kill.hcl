job "web" {
  task "a" {
    driver       = "exec"
    config { command = "/bin/true" }
    kill_signal  = "SIGTREM"
    kill_timeout = "2h"
  }
  task "b" {
    driver       = "exec"
    config { command = "/bin/true" }
    kill_signal  = "9"
    kill_timeout = "0s"
  }
  task "c" {
    driver       = "exec"
    config { command = "/bin/true" }
    kill_signal  = ""
    kill_timeout = "10"
  }
}
