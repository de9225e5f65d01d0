package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/units"
)

// fakeSystemd is an in-memory systemd for the reconcile logic; the real one
// is exercised by the e2e tests.
type fakeSystemd struct {
	mu    sync.Mutex
	units map[string]units.State
	calls []string
	inv   int
}

func newFake() *fakeSystemd { return &fakeSystemd{units: map[string]units.State{}} }

func (f *fakeSystemd) Start(_ context.Context, spec units.Spec, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "start "+spec.Name)
	if st, ok := f.units[spec.Name]; ok && !st.Failed() {
		return errors.New("unit exists")
	}
	f.inv++
	f.units[spec.Name] = units.State{Name: spec.Name, ActiveState: "active", SubState: "running", InvocationID: fmt.Sprint(f.inv)}
	return nil
}

func (f *fakeSystemd) Stop(_ context.Context, name string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "stop "+name)
	delete(f.units, name)
	return nil
}

func (f *fakeSystemd) ResetFailed(context.Context, string) error { return nil }

func (f *fakeSystemd) Version() int { return 252 }

func (f *fakeSystemd) Get(name string) (units.State, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.units[name]
	return s, ok
}

func (f *fakeSystemd) Snapshot() []units.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []units.State
	for _, s := range f.units {
		out = append(out, s)
	}
	return out
}

func (f *fakeSystemd) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	sort.Strings(c)
	return c
}

type fakeDriver struct{}

func (fakeDriver) Name() string { return "exec" }
func (fakeDriver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	return units.Spec{Name: in.Unit}, nil
}

func newSup(t *testing.T, dir string, sd *fakeSystemd) *Supervisor {
	t.Helper()
	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := Config{DataDir: dir, Namer: units.Namer{Prefix: "uv"}, Slice: "unitvisor.slice",
		Ports: PortRange{Min: 40000, Max: 40100}, Drivers: map[string]Driver{"exec": fakeDriver{}}}
	return New(cfg, store, sd, sd, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func jobSrc(bArg string, bCount int) []byte {
	return fmt.Appendf(nil, `
job "web" {
  task "a" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
    port "http" {}
  }
  task "b" {
    driver = "exec"
    count  = %d
    config {
      command = "/bin/sleep"
      args    = [%q]
    }
  }
}`, bCount, bArg)
}

func submit(t *testing.T, s *Supervisor, src []byte) SubmitResult {
	t.Helper()
	res, err := s.Submit(context.Background(), "web.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	return res
}

func wantCalls(t *testing.T, sd *fakeSystemd, want ...string) {
	t.Helper()
	got := sd.takeCalls()
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("systemd calls:\n got  %q\n want %q", got, want)
	}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	sd := newFake()
	s := newSup(t, dir, sd)

	res := submit(t, s, jobSrc("600", 2))
	if res.Tasks["a"] != "created" || res.Version != 1 {
		t.Fatalf("submit result %+v", res)
	}
	wantCalls(t, sd, "start uv-web-a@0.service", "start uv-web-b@0.service", "start uv-web-b@1.service")
	port := s.mustStatus(t).Instances[0].Ports["http"]
	if port < 40000 || port > 40100 {
		t.Fatalf("dynamic port %d outside the range", port)
	}

	// An agent restart on the same store adopts everything: no calls.
	s.store.Close()
	s = newSup(t, dir, sd)
	if err := s.reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, sd)
	if got := s.mustStatus(t).Instances[0].Ports["http"]; got != port {
		t.Fatalf("port changed across restart: %d -> %d", port, got)
	}

	// A unit of our prefix nobody wants is stopped; a vanished one restarted.
	sd.units["uv-old-x@0.service"] = units.State{Name: "uv-old-x@0.service", ActiveState: "active"}
	delete(sd.units, "uv-web-b@1.service")
	s.reconcile(context.Background())
	wantCalls(t, sd, "stop uv-old-x@0.service", "start uv-web-b@1.service")

	// Changing task b replaces only b's units.
	res = submit(t, s, jobSrc("601", 2))
	if res.Tasks["a"] != "unchanged" || res.Tasks["b"] != "replaced" {
		t.Fatalf("update result %+v", res)
	}
	wantCalls(t, sd, "stop uv-web-b@0.service", "stop uv-web-b@1.service", "start uv-web-b@0.service", "start uv-web-b@1.service")

	// Lowering the count stops the extra instance only.
	res = submit(t, s, jobSrc("601", 1))
	if res.Tasks["b"] != "scaled" {
		t.Fatalf("scale result %+v", res)
	}
	wantCalls(t, sd, "stop uv-web-b@1.service")

	// Stop keeps the final state for status; a later reconcile starts nothing.
	if err := s.StopJob(context.Background(), "web", false); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, sd, "stop uv-web-a@0.service", "stop uv-web-b@0.service")
	st := s.mustStatus(t)
	if !st.Stopped || st.Instances[0].Status != StatusDead || st.Instances[0].State == nil {
		t.Fatalf("status after stop: %+v", st)
	}
	s.reconcile(context.Background())
	wantCalls(t, sd)
}

func (s *Supervisor) mustStatus(t *testing.T) JobStatus {
	t.Helper()
	st, err := s.Status("web")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSubmitRefusesWhatTheAgentCannotRun(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	submit(t, s, jobSrc("600", 1))
	sd.takeCalls()
	_, err := s.Submit(context.Background(), "raw.hcl", []byte(`
job "raw" {
  task "r" {
    driver = "raw_exec"
    config {
      command = "/bin/true"
    }
    port "p" {
      static = 8080
    }
  }
}`))
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Problems) != 1 || !strings.Contains(inv.Problems[0], `raw.hcl:4:14: task "r": driver "raw_exec" is not enabled`) {
		t.Fatalf("got %v", err)
	}
	_, err = s.Submit(context.Background(), "bad.hcl", []byte(`job "x" {}`))
	if !errors.As(err, &inv) {
		t.Fatalf("invalid file: got %v", err)
	}
	wantCalls(t, sd) // nothing running was touched
	if _, ok, _ := s.store.Job("raw"); ok {
		t.Fatal("refused job was stored")
	}
}

func TestStaticPortClashAcrossJobs(t *testing.T) {
	s := newSup(t, t.TempDir(), newFake())
	job := func(name string) []byte {
		return fmt.Appendf(nil, `
job %q {
  task "t" {
    driver = "exec"
    config {
      command = "/bin/true"
    }
    port "p" {
      static = 8080
    }
  }
}`, name)
	}
	if _, err := s.Submit(context.Background(), "one.hcl", job("one")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Submit(context.Background(), "two.hcl", job("two"))
	if err == nil || !strings.Contains(err.Error(), `static port 8080 (p) is already used by job "one"`) {
		t.Fatalf("got %v", err)
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		st           units.State
		status, want string
	}{
		{units.State{ActiveState: "active", SubState: "running"}, StatusRunning, ""},
		{units.State{ActiveState: "active", SubState: "exited", ExecMainCode: units.CodeExited}, StatusComplete, "exit code 0"},
		{units.State{ActiveState: "activating", SubState: "auto-restart", ExecMainCode: units.CodeExited, ExecMainStatus: 3, Result: "exit-code"}, StatusRestarting, "exit code 3, result exit-code"},
		{units.State{ActiveState: "failed", SubState: "failed", ExecMainCode: units.CodeKilled, ExecMainStatus: 9, Result: "signal"}, StatusFailed, "signal 9, result signal"},
		{units.State{ActiveState: "failed", ExecMainCode: units.CodeExited, ExecMainStatus: 203, Result: "exit-code"}, StatusFailed, "exit code 203/EXEC, result exit-code"},
		{units.State{ActiveState: "inactive", SubState: "dead"}, StatusDead, ""},
	} {
		status, detail := summarize(tc.st)
		if status != tc.status || detail != tc.want {
			t.Errorf("%+v: got %q %q, want %q %q", tc.st, status, detail, tc.status, tc.want)
		}
	}
}

func resJob(name, res string, count int) []byte {
	return fmt.Appendf(nil, `
job %q {
  task "t" {
    driver = "exec"
    count  = %d
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
    resources {
%s
    }
  }
}`, name, count, res)
}

func TestResourceChecksAtSubmit(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	s.cfg.Node = Node{MemoryMB: 1000, CPUs: []int{0, 1, 2, 3}, Reserved: []int{3}}
	ctx := context.Background()
	if _, err := s.Submit(ctx, "a.hcl", resJob("a", "memory = 300", 2)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, res, want string }{
		{"big.hcl", "memory = 500", `big.hcl:11:10: task "t": job "big" needs 500 MiB of memory for its instances, but only 400 MiB are free (1000 MiB for tasks on this machine, 600 MiB held by other jobs)`},
		{"cpus.hcl", `cpuset = "2-5"`, `cpus.hcl:11:10: task "t": cpuset "2-5" names CPU 4, but this machine's CPUs are 0,1,2,3`},
		{"dev.hcl", `devices = ["/dev/no-such-device"]`, `dev.hcl:11:11: task "t": device /dev/no-such-device: no such file or directory`},
		{"cores.hcl", "cores = 4", `cores.hcl:11:9: task "t": job "cores" needs 4 dedicated cores, but only 3 are free`},
	} {
		_, err := s.Submit(ctx, tc.file, resJob(strings.TrimSuffix(tc.file, ".hcl"), tc.res, 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %s", tc.file, err, tc.want)
		}
	}
	// Resubmitting job a with the same memory fits: its own old version
	// does not count against it.
	if _, err := s.Submit(ctx, "a.hcl", resJob("a", "memory = 300", 2)); err != nil {
		t.Fatal(err)
	}
}

func TestCoresAreDedicated(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	s.cfg.Node = Node{MemoryMB: 1000, CPUs: []int{0, 1, 2, 3}, Reserved: []int{3}}
	submit(t, s, resJob("c", "cores = 1", 3))
	recs, err := s.recordMap()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.CPUs == "" || r.CPUs == "3" || seen[r.CPUs] {
			t.Fatalf("cores %q of %s: want one of 0-2, each once (%v)", r.CPUs, r.Unit, recs)
		}
		seen[r.CPUs] = true
	}
	// An agent restart keeps them.
	s.store.Close()
	s2 := newSup(t, s.cfg.DataDir, sd)
	s2.reconcile(context.Background())
	wantCalls(t, sd, "start uv-c-t@0.service", "start uv-c-t@1.service", "start uv-c-t@2.service")
	recs2, _ := s2.recordMap()
	for name, r := range recs2 {
		if r.CPUs != recs[name].CPUs {
			t.Fatalf("%s cores changed across restart: %s -> %s", name, recs[name].CPUs, r.CPUs)
		}
	}
}
