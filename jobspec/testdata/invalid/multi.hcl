# Several problems in several tasks: all are reported at once.
job "web" {
  task "api" {
    driver = "exec"
    config {
      comand = "/usr/bin/python3"
    }
    count = 0
  }

  task "worker" {
    driver = "exex"
    config {
      command = "python3"
    }
    kill_signal = "SIGFOO"
  }

  task "db" {
    driver = "raw_exec"
    config {
      command = "/usr/bin/postgres"
      args    = ["-p", "${UNITVISOR_PORT_pg}"]
    }
    env {
      UNITVISOR_DB = "x"
    }
    restart {
      mode = "fial"
    }
  }
}
