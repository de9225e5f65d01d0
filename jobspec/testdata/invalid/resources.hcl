job "res" {
  task "a" {
    driver = "exec"
    config {
      command = "/bin/true"
    }
    resources {
      cpu        = -5
      cpu_limit  = "1.5"
      cores      = 2
      cpuset     = "0-1"
      memory     = 64
      memory_max = 32
      pids       = 0
      io_weight  = 20000
      devices    = ["/dev/fuse rw", "fuse", "/dev/null rwx"]
    }
  }
  task "b" {
    driver = "exec"
    config {
      command = "/bin/true"
    }
    resources {
      cpuset = "3-1"
      swap   = 128
      memry  = 5
    }
  }
}
