job "web" {
  task "api" {
    driver = "exec"
    config { command = "/bin/true" }
    port "http" {}
    shutdown_delay = "2h"
    service {
      port = "http"
    }
    service {
      name = "bad_name"
      port = "htp"
      tags = "v1"
      meta {
        external-source = "me"
        ok-key = "${UNITVISOR_NOPE}"
      }
      check {
        name = "ping"
      }
      check {
        type = "htpp"
      }
    }
    service {
      name = "web"
      port = "http"
      check {
        type     = "http"
        path     = "health"
        method   = "FETCH"
        protocol = "ftp"
        interval = "100ms"
        command  = "/bin/true"
      }
      check {
        type = "http"
        check_restart {
          grace = "1s"
        }
      }
      check {
        type = "ttl"
        check_restart {
          limit = 2
        }
      }
      check {
        type = "script"
        name = "sc ript"
      }
      check {
        type    = "script"
        command = "relative/path"
        timeout = "0s"
      }
    }
    service {
      name = "web"
    }
  }
  task "noport" {
    driver = "exec"
    config { command = "/bin/true" }
    service {
      name = "db"
      port = "x"
      check {
        type = "tcp"
      }
    }
  }
}
