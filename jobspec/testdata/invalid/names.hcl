job "-web" {
  task "api" {
    driver = "exec"
    config { command = "/bin/true" }
  }
  task "api" {
    driver = "exec"
    config { command = "/bin/true" }
  }
  task "my task" {
    driver = "exec"
    config { command = "/bin/true" }
  }
  task "a-very-long-task-name-that-does-not-fit-in-sixty-three-characters" {
    driver = "exec"
    config { command = "/bin/true" }
  }
  task "" {
    driver = "exec"
    config { command = "/bin/true" }
  }
}
