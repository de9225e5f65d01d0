job "web" {
  task "nodriver" {
    config { command = "/bin/true" }
  }
  task "noconfig" {
    driver = "raw_exec"
  }
  task "nocommand" {
    driver = "exec"
    config {
      args = ["x"]
    }
  }
  task "relative" {
    driver = "exec"
    config {
      command = "python3"
    }
  }
  task "podman" {
    driver = "podman"
    config {
      command = "/bin/true"
    }
  }
  task "twoconfigs" {
    driver = "exec"
    config {
      command = "/bin/true"
    }
    config {
      command = "/bin/false"
    }
  }
}
