job "web" {
  datacenters = ["dc1"]
  group "g" {}

  task "api" {
    drivr = "exec"
    driver = "exec"
    config {
      command = "/bin/true"
      image   = "nginx"
      mounts {}
    }
    env = { A = "b" }
    restart "x" {}
    user {}
    volume "data" {
      cpu = 100
    }
    port "http" {
      statc = 8080
    }
  }
}
