package drivers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/drivers/exec"
	"github.com/unitvisor/unitvisor/drivers/rawexec"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

var update = flag.Bool("update", false, "rewrite golden files")

type preparer interface {
	Prepare(context.Context, drivers.Instance) (units.Spec, error)
}

// TestGoldenProperties pins the exact unit properties (name, D-Bus type,
// value) each driver produces for a fixed task.
func TestGoldenProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    preparer
		user string
		mode string
		res  *jobspec.Resources
		cpus string
	}{
		{"exec", exec.Driver{}, "", jobspec.RestartModeFail, nil, ""},
		{"raw_exec", rawexec.Driver{}, "", jobspec.RestartModeDelay, nil, ""},
		{"raw_exec_user", rawexec.Driver{}, "nobody", jobspec.RestartModeFail, nil, ""},
		{"exec_resources", exec.Driver{}, "", jobspec.RestartModeFail, &jobspec.Resources{
			CPU: 200, CPULimit: 150, Cores: 2, MemoryMB: 64, MemoryMaxMB: 128, SwapMB: 16, Pids: 50, IOWeight: 300,
			Devices: []string{"/dev/null rw"}}, "2-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tasks", "web", "api", "1")
			task := &jobspec.Task{
				Name: "api", Driver: strings.TrimSuffix(tc.name, "_resources"), Count: 2, User: tc.user,
				Config:      jobspec.Config{Command: "/usr/bin/python3", Args: []string{"-m", "http.server", "${UNITVISOR_PORT_http}", "$HOME", "${PATH}"}},
				Env:         map[string]string{"GREETING": "hello from ${UNITVISOR_TASK}"},
				Ports:       []jobspec.Port{{Label: "http"}},
				Restart:     jobspec.RestartPolicy{Attempts: 3, Interval: 5 * time.Minute, Delay: 5 * time.Second, Mode: tc.mode},
				KillSignal:  "SIGINT",
				KillTimeout: 10 * time.Second,
				Resources:   tc.res,
			}
			job := &jobspec.Job{Name: "web", Tasks: []*jobspec.Task{task}}
			ports := map[string]int{"http": 24567}
			in := drivers.Instance{Job: job, Task: task, Index: 1, Unit: "uv-web-api@1.service", Slice: "unitvisor.slice",
				TaskDir: dir, Ports: ports, CPUs: tc.cpus, Vars: jobspec.VarsFor(job, task, 1, "/TASKDIR", "uv-web-api@1.service", ports)}
			spec, err := tc.d.Prepare(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "unit %s\n", spec.Name)
			for _, p := range spec.Properties {
				v := p.Value.String()
				if bs, ok := p.Value.Value().([][]byte); ok { // aay: show the text
					v = fmt.Sprintf("%q", bs)
				}
				fmt.Fprintf(&b, "%s %s = %s\n", p.Name, p.Value.Signature(), strings.ReplaceAll(v, dir, "/TASKDIR"))
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				os.MkdirAll("testdata", 0o755)
				os.WriteFile(golden, []byte(b.String()), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if b.String() != string(want) {
				t.Fatalf("properties differ from %s:\n--- got\n%s--- want\n%s", golden, b.String(), want)
			}
			for _, sub := range []string{"local", "secrets", "tmp"} {
				if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
					t.Errorf("task dir: %v", err)
				}
			}
		})
	}
}

func TestUnknownUser(t *testing.T) {
	task := &jobspec.Task{Name: "t", User: "no-such-user-here", Config: jobspec.Config{Command: "/bin/true"}, KillSignal: "SIGTERM"}
	_, err := exec.Driver{}.Prepare(context.Background(), drivers.Instance{Job: &jobspec.Job{Name: "j"}, Task: task, TaskDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "does not exist on this machine") {
		t.Fatalf("want a clear unknown-user error, got %v", err)
	}
}

func TestRestartProperties(t *testing.T) {
	if p := drivers.RestartProperties(jobspec.RestartPolicy{}); len(p) != 1 || p[0].Value.Value() != "no" {
		t.Fatalf("attempts 0: %v", p)
	}
	p := drivers.RestartProperties(jobspec.RestartPolicy{Attempts: 2, Interval: time.Minute, Delay: time.Second})
	got := map[string]any{}
	for _, x := range p {
		got[x.Name] = x.Value.Value()
	}
	if got["StartLimitBurst"] != uint32(3) || got["RestartUSec"] != uint64(1e6) || got["StartLimitIntervalUSec"] != uint64(60e6) {
		t.Fatalf("got %v", got)
	}
}
