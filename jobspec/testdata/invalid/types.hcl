job "web" {
  task "api" {
    driver = "exec"
    count  = "two"
    config {
      command = ["/bin/true"]
      args    = "-v"
    }
    env {
      LIST = ["a", "b"]
      NULL = null
    }
    user = { name = "x" }
  }
  task "b" {
    driver = 1
    count  = 2.5
    config {
      command = "/bin/true"
      args    = ["-v", 1, true, ["nested"]]
    }
    port "http" {
      static = "8080"
    }
  }
  task "c" {
    driver = "exec"
    count  = 1001
    config {
      command = "/bin/true"
      args    = []
    }
  }
}
