package supervisor

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// recordingHook notes each BeforeStop and whether the unit was still
// there (not yet stopped) at that moment.
type recordingHook struct {
	sd    *fakeSystemd
	mu    sync.Mutex
	calls []string
}

func (h *recordingHook) BeforeStop(_ context.Context, job, task string, index int) {
	unit := fmt.Sprintf("uv-%s-%s@%d.service", job, task, index)
	_, running := h.sd.Get(unit)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("%s running=%v", unit, running))
}

func (h *recordingHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls
	h.calls = nil
	return c
}

func serviceJob(args, tag string) []byte {
	return fmt.Appendf(nil, `
job "web" {
  task "a" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = [%q]
    }
    port "http" {}
    service {
      name = "web"
      port = "http"
      tags = [%q]
    }
  }
}`, args, tag)
}

func TestStopHookAndRestart(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	hook := &recordingHook{sd: sd}
	s.cfg.StopHook = hook
	ctx := context.Background()

	submit(t, s, serviceJob("600", "v1"))
	wantCalls(t, sd, "start uv-web-a@0.service")
	in, ok, err := s.Instance("web", "a", 0)
	if err != nil || !ok || in.Ports["http"] == 0 || in.Vars["UNITVISOR_PORT_http"] == "" || !in.Live || len(in.Task.Services) != 1 {
		t.Fatalf("Instance: %+v %v %v", in, ok, err)
	}
	if all, err := s.Instances(); err != nil || len(all) != 1 {
		t.Fatalf("Instances: %d, %v", len(all), err)
	}
	if _, ok, _ := s.Instance("web", "a", 1); ok {
		t.Fatal("Instance reports an index beyond count")
	}

	// Services are the bridge's business: changing them restarts nothing.
	if res := submit(t, s, serviceJob("600", "v2")); res.Tasks["a"] != "unchanged" {
		t.Fatalf("a service change: %+v", res)
	}
	wantCalls(t, sd)

	// A new definition: the hook is told before the stop.
	submit(t, s, serviceJob("601", "v2"))
	wantCalls(t, sd, "stop uv-web-a@0.service", "start uv-web-a@0.service")
	if got := hook.take(); len(got) != 1 || got[0] != "uv-web-a@0.service running=true" {
		t.Fatalf("hook calls %q", got)
	}

	// check_restart: hook, stop, start with the same ports.
	port := in.Ports["http"]
	if err := s.RestartTask(ctx, "web", "a", 0, "test"); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, sd, "stop uv-web-a@0.service", "start uv-web-a@0.service")
	if got := hook.take(); len(got) != 1 || got[0] != "uv-web-a@0.service running=true" {
		t.Fatalf("hook calls %q", got)
	}
	if in, _, _ := s.Instance("web", "a", 0); in.Ports["http"] != port {
		t.Fatalf("port changed on restart: %d -> %d", port, in.Ports["http"])
	}
	if spec, err := s.InstanceSpec(ctx, "web", "a", 0); err != nil || spec.Name != "uv-web-a@0.service" {
		t.Fatalf("InstanceSpec: %+v, %v", spec, err)
	}
	if err := s.RestartTask(ctx, "web", "nope", 0, "test"); err == nil {
		t.Fatal("restart of an unknown task succeeded")
	}

	if err := s.StopJob(ctx, "web", false); err != nil {
		t.Fatal(err)
	}
	if got := hook.take(); len(got) != 1 || got[0] != "uv-web-a@0.service running=true" {
		t.Fatalf("hook calls on job stop %q", got)
	}
	if _, ok, _ := s.Instance("web", "a", 0); ok {
		t.Fatal("a stopped job's instance is still wanted")
	}
}
