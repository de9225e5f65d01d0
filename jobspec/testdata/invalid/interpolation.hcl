job "web" {
  task "api" {
    driver = "exec"
    config {
      command = "${UNITVISOR_TASK_DIR}/bin/${UNITVISOR_TASKK}"
      args = [
        "${a.b}",
        "${foo[0]}",
        "${upper("x")}",
        "${UNITVISOR_PORT_nope}",
        "${UNITVISOR_PORT_http}",
        "${PATH}",
      ]
    }
    port "http" {}
    env {
      X = "${UNITVISOR_FOO}"
    }
    user        = "${UNITVISOR_TASK}"
    kill_signal = upper("term")
  }
}
