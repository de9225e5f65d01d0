job "vm" {
  task "j" {
    driver = "java"
    config {
      class_path  = "/opt/lib"
      jvm_options = "-Xmx1g"
    }
  }
  task "k" {
    driver = "java"
    config {
      jar_path = "app.jar"
      class    = "not a class"
      command  = "/bin/true"
    }
  }
  task "q" {
    driver = "qemu"
    port "ssh" {}
    config {
      accelerator       = "hvf"
      machine           = "Q 35"
      graceful_shutdown = "yes"
      port_map          = { ssh = 22, http = 80, x = 70000 }
    }
  }
}
