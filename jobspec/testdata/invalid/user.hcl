job "web" {
  task "a" {
    driver = "exec"
    config { command = "/bin/true" }
    user   = "Bob"
  }
  task "b" {
    driver = "exec"
    config { command = "/bin/true" }
    user   = "a-user-name-that-is-much-too-long-for-linux"
  }
  task "c" {
    driver = "exec"
    config { command = "/bin/true" }
    user   = "4294967295"
  }
  task "d" {
    driver = "exec"
    config { command = "/bin/true" }
    user   = ""
  }
}
