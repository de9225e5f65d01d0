package docker

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testInstance(c jobspec.Config) drivers.Instance {
	task := &jobspec.Task{
		Name: "api", Driver: "docker", Count: 2, Config: c,
		Env:         map[string]string{"GREETING": "hello from ${UNITVISOR_TASK}", "OVERRIDE": "task"},
		Ports:       []jobspec.Port{{Label: "http"}},
		KillSignal:  "SIGTERM",
		KillTimeout: 10 * time.Second,
		Resources:   &jobspec.Resources{MemoryMB: 64, Devices: []string{"/dev/null"}},
	}
	job := &jobspec.Job{Name: "web", Tasks: []*jobspec.Task{task}}
	ports := map[string]int{"http": 24567}
	return drivers.Instance{Job: job, Task: task, Index: 1, Unit: "uv-web-api@1.service", Slice: "unitvisor.slice",
		TaskDir: "/TASKDIR", Ports: ports,
		Vars: jobspec.VarsFor(job, task, 1, "/TASKDIR", "uv-web-api@1.service", ports)}
}

var testImage = v1Config{
	Env:        []string{"PATH=/bin", "OVERRIDE=image"},
	Entrypoint: []string{"/entry"},
	Cmd:        []string{"serve", "--default"},
	WorkingDir: "/app",
}

// TestGoldenSpec pins the config.json of a task using every setting.
func TestGoldenSpec(t *testing.T) {
	in := testInstance(jobspec.Config{
		Image:          "busybox:1",
		Entrypoint:     []string{"/bin/sh", "-c"},
		Args:           []string{"echo ${UNITVISOR_PORT_http} ${UNITVISOR_TASK_DIR}local $HOME"},
		WorkDir:        "/srv",
		Volumes:        []jobspec.Volume{{Host: "/srv/data", Container: "/data", ReadOnly: true}},
		CapAdd:         []string{"CAP_NET_ADMIN"},
		CapDrop:        []string{"CAP_MKNOD", "CAP_NET_RAW"},
		Init:           true,
		ReadonlyRootfs: true,
	})
	spec, err := Spec(SpecInput{
		Instance: in, Image: testImage,
		User:   User{UID: 1000, GID: 1000, Groups: []uint32{2000}, Home: "/home/app"},
		Mounts: []Mount{{Host: "/srv/data", Container: "/data", ReadOnly: true}},
		Init:   "/usr/bin/tini-static",
		Hosts:  []string{"/etc/resolv.conf"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(spec, "", "  ")
	golden := filepath.Join("testdata", "config.json.golden")
	if *update {
		os.WriteFile(golden, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got)+"\n" {
		t.Fatalf("config.json differs from %s (run with -update and check the diff):\n%s", golden, got)
	}
	if spec.Linux.Resources != nil || spec.Linux.CgroupsPath != "" {
		t.Fatal("the spec must not make the runtime touch cgroups")
	}
}

func TestArgvEnvCaps(t *testing.T) {
	vars := map[string]string{"UNITVISOR_TASK": "api"}
	for _, tc := range []struct {
		name string
		c    jobspec.Config
		want []string
	}{
		{"image", jobspec.Config{}, []string{"/entry", "serve", "--default"}},
		{"args", jobspec.Config{Args: []string{"x-${UNITVISOR_TASK}"}}, []string{"/entry", "x-api"}},
		{"entrypoint drops cmd", jobspec.Config{Entrypoint: []string{"/bin/sh"}}, []string{"/bin/sh"}},
		{"both", jobspec.Config{Entrypoint: []string{"/bin/sh", "-c"}, Args: []string{"true"}}, []string{"/bin/sh", "-c", "true"}},
	} {
		got, err := Argv(tc.c, testImage, vars)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q %v, want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := Argv(jobspec.Config{}, v1Config{}, vars); err == nil {
		t.Error("no entrypoint and no cmd: want an error")
	}
	in := testInstance(jobspec.Config{})
	env := Env(in.Task, testImage, User{Home: "/home/app"}, ContainerVars(in))
	want := map[string]bool{"PATH=/bin": true, "OVERRIDE=task": true, "HOME=/home/app": true,
		"GREETING=hello from api": true, "UNITVISOR_TASK_DIR=/": true, "UNITVISOR_PORT_http=24567": true}
	for _, kv := range env {
		delete(want, kv)
	}
	if len(want) > 0 {
		t.Errorf("env %q lacks %v", env, want)
	}
	if got := Capabilities(jobspec.Config{CapDrop: []string{"ALL"}, CapAdd: []string{"CAP_CHOWN"}}); !reflect.DeepEqual(got, []string{"CAP_CHOWN"}) {
		t.Errorf("drop ALL add CHOWN: %v", got)
	}
	if got := Capabilities(jobspec.Config{CapAdd: []string{"ALL"}}); len(got) != len(jobspec.LinuxCapabilities) {
		t.Errorf("add ALL: %d caps", len(got))
	}
}

func TestResolveUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\napp:x:1001:\nextra:x:2000:app,other\nwheel:x:10:root\n"), 0o644)
	for _, tc := range []struct {
		name string
		want User
		err  bool
	}{
		{"", User{Home: "/root", Groups: []uint32{10}}, false},
		{"app", User{UID: 1000, GID: 1001, Groups: []uint32{2000}, Home: "/home/app"}, false},
		{"1000", User{UID: 1000, GID: 1001, Groups: []uint32{2000}, Home: "/home/app"}, false},
		{"app:extra", User{UID: 1000, GID: 2000, Home: "/home/app"}, false},
		{"4242:7", User{UID: 4242, GID: 7, Home: "/"}, false},
		{"4242", User{UID: 4242, GID: 4242, Home: "/"}, false},
		{"nobody", User{}, true},
		{"app:nogroup", User{}, true},
	} {
		got, err := ResolveUser(root, tc.name)
		if (err != nil) != tc.err || !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v %v, want %+v (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestContainerID(t *testing.T) {
	for unit, want := range map[string]string{
		"uv-web-api.service": "uv-web-api",
	} {
		if got := ContainerID(unit); got != want {
			t.Errorf("%s: %s, want %s", unit, got, want)
		}
	}
	a, b := ContainerID(`uv-web-api@1.service`), ContainerID(`uv-web-api_1.service`)
	if a == b {
		t.Fatalf("IDs collide: %s", a)
	}
	if ok, _ := filepath.Match("uv-web-api_1-*", a); !ok {
		t.Fatalf("ID %s", a)
	}
}
