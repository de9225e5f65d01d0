job "containers" {
  task "none" {
    driver = "docker"
    config {
      args = ["x"]
    }
  }
  task "both" {
    driver = "docker"
    config {
      image = "Busybox:latest"
      load  = "images/app.tar"
    }
  }
  task "opts" {
    driver = "docker"
    port "http" {}
    config {
      image           = "registry.example.com:5000/team/app:1.0"
      entrypoint      = "/bin/sh"
      work_dir        = "app"
      volumes         = ["/srv/data", "/srv/x:data", "/srv/y:/y:rx", "../up:/up", "/srv/z:/z:ro"]
      readonly_rootfs = "yes"
      network_mode    = "bridge"
      cap_add         = ["net_admin", "SYS_PTRACE", "CAP_FOO", "all"]
      cap_drop        = "ALL"
      init            = 1
      command         = "/bin/true"
    }
  }
  task "auth" {
    driver = "docker"
    config {
      image = "debian:12"
      auth  = { username = "u" }
    }
  }
  task "auth2" {
    driver = "docker"
    config {
      image = "debian:12"
      auth  = { user = "u", password = "p" }
    }
  }
  task "auth3" {
    driver = "docker"
    config {
      load = "/srv/app.tar"
      auth = { config = "/root/.docker/config.json" }
    }
  }
  task "wrong" {
    driver = "exec"
    config {
      command = "/bin/true"
      image   = "debian:12"
    }
  }
}
