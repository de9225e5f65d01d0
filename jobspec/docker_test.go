package jobspec

import (
	"reflect"
	"testing"
)

func TestParseDocker(t *testing.T) {
	src := `job "web" {
  task "api" {
    driver = "docker"
    port "http" {}
    config {
      image           = "127.0.0.1:5000/team/busybox:1.36"
      entrypoint      = ["/bin/sh", "-c"]
      args            = ["echo ${UNITVISOR_PORT_http} $HOME"]
      work_dir        = "/srv/app/"
      volumes         = ["/srv/data:/data", "conf:/etc/app:ro", "/srv/log:/log:rw"]
      readonly_rootfs = true
      network_mode    = "none"
      auth            = { username = "u", password = "p" }
      cap_add         = ["net_admin", "CAP_SYS_PTRACE"]
      cap_drop        = ["all"]
      init            = true
    }
  }
  task "loaded" {
    driver = "docker"
    config {
      load = "/var/lib/images/app.tar"
    }
  }
}`
	job, err := Parse("d.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Image:      "127.0.0.1:5000/team/busybox:1.36",
		Entrypoint: []string{"/bin/sh", "-c"},
		Args:       []string{"echo ${UNITVISOR_PORT_http} $HOME"},
		WorkDir:    "/srv/app",
		Volumes: []Volume{
			{Host: "/srv/data", Container: "/data"},
			{Host: "conf", Container: "/etc/app", ReadOnly: true},
			{Host: "/srv/log", Container: "/log"},
		},
		ReadonlyRootfs: true,
		NetworkMode:    NetworkNone,
		Auth:           &RegistryAuth{Username: "u", Password: "p"},
		CapAdd:         []string{"CAP_NET_ADMIN", "CAP_SYS_PTRACE"},
		CapDrop:        []string{"ALL"},
		Init:           true,
	}
	if got := job.Tasks[0].Config; !reflect.DeepEqual(got, want) {
		t.Fatalf("config\n got %+v\nwant %+v", got, want)
	}
	if got := job.Tasks[1].Config; !reflect.DeepEqual(got, Config{Load: "/var/lib/images/app.tar"}) {
		t.Fatalf("load config: %+v", got)
	}
	if p := job.Tasks[0].At("config.image"); p != "d.hcl:6:25" {
		t.Fatalf("position of config.image: %s", p)
	}
}

func TestImageRefRE(t *testing.T) {
	for ref, ok := range map[string]bool{
		"busybox":                         true,
		"debian:12":                       true,
		"localhost:5000/a/b_c.d-e:v1.2":   true,
		"ghcr.io/org/app@sha256:" + sha:   true,
		"Busybox":                         false,
		"a b":                             false,
		"registry/app:":                   false,
		"app:-tag":                        false,
		"/abs":                            false,
		"host:port:/x":                    false,
		"127.0.0.1:5000/busybox:latest":   true,
		"example.com/app:1@sha256:" + sha: true,
	} {
		if got := imageRefRE.MatchString(ref); got != ok {
			t.Errorf("%q: match %v, want %v", ref, got, ok)
		}
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
