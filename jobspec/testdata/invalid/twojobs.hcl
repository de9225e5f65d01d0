job "a" {
  task "t" {
    driver = "exec"
    config { command = "/bin/true" }
  }
}
job "b" {}
