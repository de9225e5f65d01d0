job "web" {
  task "api" {
    driver = "exec"
    config { command = "/bin/true" }
    port "http" {
      static = 8080
    }
    port "http" {}
    port "my-port" {}
    port "big" {
      static = 70000
    }
    port "zero" {
      static = 0
    }
  }
  task "other" {
    driver = "exec"
    config { command = "/bin/true" }
    port "web" {
      static = 8080
    }
  }
  task "scaled" {
    driver = "exec"
    count  = 3
    config { command = "/bin/true" }
    port "admin" {
      static = 9090
    }
    port "dyn" {}
  }
}
