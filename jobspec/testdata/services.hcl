job "web" {
  task "api" {
    driver = "exec"
    config { command = "/usr/bin/python3" }
    port "http" {}
    shutdown_delay = "5s"
    service {
      name = "api"
      port = "http"
      tags = ["v1"]
      meta { version = "1" }
      check {
        type     = "http"
        path     = "/"
        interval = "5s"
        timeout  = "1s"
        check_restart {
          limit = 3
          grace = "10s"
        }
      }
      check { type = "ttl" }
    }
  }
}
