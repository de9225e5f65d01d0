package consulbridge

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

const node = "0123456789abcdef"

func running(unit string) units.State {
	return units.State{Name: unit, ActiveState: "active", SubState: "running", ActiveSince: time.Now().Add(-time.Hour)}
}

func instanceOf(job string, task *jobspec.Task, index int, st units.State) supervisor.Instance {
	unit := "uv-" + job + "-" + task.Name + "@" + string(rune('0'+index)) + ".service"
	st.Name = unit
	ports := map[string]int{"http": 20000 + index}
	return supervisor.Instance{
		Job: &jobspec.Job{Name: job, Tasks: []*jobspec.Task{task}}, Task: task, Index: index, Unit: unit,
		Ports: ports, Vars: jobspec.VarsFor(&jobspec.Job{Name: job}, task, index, "/tasks", unit, ports),
		State: st, Live: !st.Gone,
	}
}

func webTask(services ...jobspec.Service) *jobspec.Task {
	if len(services) == 0 {
		services = []jobspec.Service{{Name: "web", Port: "http", Tags: []string{"v1"}, Checks: []jobspec.Check{{Name: "ttl", Type: jobspec.CheckTTL}}}}
	}
	return &jobspec.Task{Name: "api", Count: 1, Ports: []jobspec.Port{{Label: "http"}}, Services: services}
}

type harness struct {
	t      *testing.T
	consul *fakeConsul
	tasks  *fakeTasks
	sd     *fakeSystemd
	obs    *countingObserver
	b      *Bridge
	events chan supervisor.TaskEvent
}

func start(t *testing.T, cfg Config, prepare func(*harness)) *harness {
	t.Helper()
	h := &harness{t: t, consul: newFakeConsul(), tasks: newFakeTasks(), sd: &fakeSystemd{},
		obs: &countingObserver{ops: map[string]int{}}, events: make(chan supervisor.TaskEvent, 64)}
	if prepare != nil {
		prepare(h)
	}
	cfg.Node = node
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = time.Hour
	}
	cfg.UnitPrefix, cfg.DataDir = "uv", t.TempDir()
	h.b = New(cfg, h.consul, h.sd, h.obs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.b.Run(ctx, h.tasks, h.events)
	return h
}

// send makes the fake supervisor report a unit state.
func (h *harness) send(in supervisor.Instance, st units.State) {
	st.Name = in.Unit
	if st.Gone {
		h.tasks.remove(in.Job.Name)
	} else {
		in.State, in.Live = st, true
		h.tasks.set(in)
	}
	h.events <- supervisor.TaskEvent{Job: in.Job.Name, Task: in.Task.Name, Index: in.Index, State: st}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (h *harness) waitStatus(checkID, status, output string) {
	h.t.Helper()
	eventually(h.t, checkID+" "+status, func() bool {
		s, o := h.consul.status(checkID)
		return s == status && strings.Contains(o, output)
	})
}

func TestTTLFollowsUnit(t *testing.T) {
	h := start(t, Config{}, nil)
	in := instanceOf("web", webTask(), 0, running(""))
	id := ServiceID(node, "web", "api", 0, "web")
	cid := CheckID(id, "ttl")

	// Activating for the first time: not registered yet.
	h.send(in, units.State{ActiveState: "activating", SubState: "start"})
	h.send(in, running(""))
	h.waitStatus(cid, api.HealthPassing, "active (running)")
	h.consul.mu.Lock()
	svc := h.consul.services[id]
	h.consul.mu.Unlock()
	if svc.Service != "web" || svc.Port != 20000 || svc.Tags[0] != "v1" || svc.Meta[MetaSource] != "unitvisor" || svc.Meta[MetaNode] != node {
		t.Fatalf("registration: %+v", svc)
	}

	restarting := running("")
	restarting.ActiveState, restarting.SubState, restarting.Result = "activating", "auto-restart", "signal"
	restarting.ExecMainCode, restarting.ExecMainStatus, restarting.NRestarts = units.CodeKilled, 9, 1
	h.send(in, restarting)
	h.waitStatus(cid, api.HealthWarning, "restarting after result signal, signal 9 (1 restarts)")

	failed := restarting
	failed.ActiveState, failed.SubState, failed.Result = "failed", "failed", "exit-code"
	failed.ExecMainCode, failed.ExecMainStatus = units.CodeExited, 3
	h.send(in, failed)
	h.waitStatus(cid, api.HealthCritical, "result exit-code, exit code 3")

	h.send(in, units.State{Gone: true})
	eventually(t, "deregistration", func() bool { return !h.consul.has(id) })
	eventually(t, "empty queue", func() bool {
		h.obs.mu.Lock()
		defer h.obs.mu.Unlock()
		return h.obs.depth == 0
	})
}

func TestConsulDownQueuesAndConverges(t *testing.T) {
	h := start(t, Config{SyncInterval: 100 * time.Millisecond}, func(h *harness) { h.consul.setDown(true) })
	a := instanceOf("a", webTask(), 0, running(""))
	b := instanceOf("b", webTask(), 0, running(""))
	h.send(a, running(""))
	h.send(b, running(""))
	failed := running("")
	failed.ActiveState, failed.SubState, failed.Result = "failed", "failed", "exit-code"
	h.send(a, failed)
	h.send(b, units.State{Gone: true})
	eventually(t, "queued work", func() bool {
		h.obs.mu.Lock()
		defer h.obs.mu.Unlock()
		return h.obs.depth > 0
	})
	time.Sleep(300 * time.Millisecond) // a few failed attempts
	h.consul.setDown(false)
	ida := ServiceID(node, "a", "api", 0, "web")
	h.waitStatus(CheckID(ida, "ttl"), api.HealthCritical, "result exit-code")
	if h.consul.has(ServiceID(node, "b", "api", 0, "web")) {
		t.Fatal("a stopped task was registered")
	}
}

func TestAntiEntropy(t *testing.T) {
	other := "fedcba9876543210"
	stale := ServiceID(node, "old", "api", 0, "web")
	foreign := ServiceID(other, "web", "api", 0, "web")
	handMade := ServiceID(node, "web", "api", 0, "web2") // our prefix, but not registered by us
	h := start(t, Config{SyncInterval: 50 * time.Millisecond, Probation: 2 * time.Second}, func(h *harness) {
		for _, id := range []string{stale, foreign} {
			h.consul.services[id] = &api.AgentService{ID: id, Service: "web", Meta: map[string]string{MetaSource: "unitvisor"}}
		}
		h.consul.services[handMade] = &api.AgentService{ID: handMade, Service: "web"}
	})
	in := instanceOf("web", webTask(), 0, running(""))
	h.tasks.set(in) // adopted: known from the store before any event
	id := ServiceID(node, "web", "api", 0, "web")
	cid := CheckID(id, "ttl")
	h.waitStatus(cid, api.HealthPassing, "running")
	if !h.consul.has(stale) {
		t.Fatal("an owned service was reaped during probation")
	}
	eventually(t, "stale service reaped after probation", func() bool { return !h.consul.has(stale) })
	if !h.consul.has(foreign) || !h.consul.has(handMade) {
		t.Fatal("a service the bridge does not own was removed")
	}

	// Consul lost the registration, or someone changed the status.
	h.consul.mu.Lock()
	delete(h.consul.services, id)
	delete(h.consul.checks, cid)
	h.consul.mu.Unlock()
	eventually(t, "re-registration", func() bool { return h.consul.has(id) })
	h.waitStatus(cid, api.HealthPassing, "running")
	h.consul.mu.Lock()
	h.consul.checks[cid].Status = api.HealthCritical
	h.consul.mu.Unlock()
	h.waitStatus(cid, api.HealthPassing, "running")
}

func TestSteadyStateCallsDoNotGrow(t *testing.T) {
	perSync := func(n int) map[string]int {
		h := start(t, Config{SyncInterval: 20 * time.Millisecond}, nil)
		for i := 0; i < n; i++ {
			h.tasks.set(instanceOf("web", webTask(), i, running("")))
		}
		eventually(t, "all registered", func() bool {
			h.consul.mu.Lock()
			defer h.consul.mu.Unlock()
			for _, c := range h.consul.checks {
				if c.Output == "" {
					return false
				}
			}
			return len(h.consul.checks) == n
		})
		time.Sleep(50 * time.Millisecond)
		h.consul.resetCalls()
		time.Sleep(200 * time.Millisecond)
		return h.consul.callCounts()
	}
	for _, n := range []int{10, 100} {
		calls := perSync(n)
		syncs := calls["services"]
		if syncs == 0 || calls["checks"] != syncs || len(calls) != 2 {
			t.Errorf("%d tasks: steady state made calls %v; want only one services and one checks listing per sync", n, calls)
		}
	}
}

func TestBeforeStopDeregistersThenWaits(t *testing.T) {
	h := start(t, Config{}, nil)
	task := webTask()
	task.ShutdownDelay = 200 * time.Millisecond
	in := instanceOf("web", task, 0, running(""))
	id := ServiceID(node, "web", "api", 0, "web")
	h.send(in, running(""))
	eventually(t, "registration", func() bool { return h.consul.has(id) })

	began := time.Now()
	h.b.BeforeStop(context.Background(), "web", "api", 0)
	if took := time.Since(began); took < task.ShutdownDelay {
		t.Errorf("BeforeStop returned after %s, before shutdown_delay", took)
	}
	if h.consul.has(id) {
		t.Fatal("service still registered when the stop begins")
	}
	// Events of the stop must not register it again.
	stopping := in.State
	stopping.ActiveState, stopping.SubState = "deactivating", "stop-sigterm"
	h.send(in, stopping)
	time.Sleep(50 * time.Millisecond)
	if h.consul.has(id) {
		t.Fatal("registered again while stopping")
	}
	// A new start (later ActiveSince) registers again.
	h.send(in, units.State{ActiveState: "active", SubState: "running", ActiveSince: time.Now()})
	eventually(t, "registration after restart", func() bool { return h.consul.has(id) })
}

func TestBeforeStopDoesNotWaitForConsul(t *testing.T) {
	h := start(t, Config{DeregisterWait: 100 * time.Millisecond}, nil)
	in := instanceOf("web", webTask(), 0, running(""))
	id := ServiceID(node, "web", "api", 0, "web")
	h.send(in, running(""))
	eventually(t, "registration", func() bool { return h.consul.has(id) })
	h.consul.setDown(true)
	began := time.Now()
	h.b.BeforeStop(context.Background(), "web", "api", 0)
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("BeforeStop waited %s for an unreachable Consul", took)
	}
	h.consul.setDown(false)
	eventually(t, "deregistration once Consul is back", func() bool { return !h.consul.has(id) })
}

func TestScriptCheckAndCheckRestart(t *testing.T) {
	h := start(t, Config{}, func(h *harness) {
		h.sd.status = 1
		h.tasks.spec = units.Spec{Name: "uv-web-api@0.service", Properties: []units.Property{
			units.String("User", "nobody"), units.String("Type", "exec"), units.ExecStart([]string{"/bin/task"}),
			units.String("WorkingDirectory", "/tasks"), units.String("Restart", "on-failure"),
		}}
	})
	task := webTask(jobspec.Service{Name: "web", Port: "http", Checks: []jobspec.Check{{
		Name: "probe", Type: jobspec.CheckScript, Command: "/bin/probe", Args: []string{"${UNITVISOR_PORT_http}"},
		Interval: 20 * time.Millisecond, Timeout: time.Second,
		CheckRestart: &jobspec.CheckRestart{Limit: 3, Grace: 0},
	}}})
	in := instanceOf("web", task, 0, running(""))
	cid := CheckID(ServiceID(node, "web", "api", 0, "web"), "probe")
	h.send(in, running(""))
	h.waitStatus(cid, api.HealthWarning, "exit code 1")

	h.sd.mu.Lock()
	spec := h.sd.specs[0]
	h.sd.mu.Unlock()
	if v, _ := spec.Get("User"); v != "nobody" {
		t.Errorf("script check unit does not run as the task's user: %v", spec.Properties)
	}
	if v, _ := spec.Get("Type"); v != "oneshot" {
		t.Errorf("script check unit Type = %v, want oneshot", v)
	}
	if _, ok := spec.Get("Restart"); ok {
		t.Errorf("script check unit kept the task's Restart")
	}
	if !strings.HasPrefix(spec.Name, "uv-check-web-api-0-web-probe") {
		t.Errorf("script check unit name %q", spec.Name)
	}

	h.sd.setStatus(2)
	h.waitStatus(cid, api.HealthCritical, "exit code 2")
	select {
	case <-h.tasks.restarted:
	case <-time.After(5 * time.Second):
		t.Fatal("no restart after 3 critical results")
	}
	// No second restart until the unit has started again.
	select {
	case <-h.tasks.restarted:
		t.Fatal("restarted twice for the same unit start")
	case <-time.After(200 * time.Millisecond):
	}
	h.tasks.mu.Lock()
	reason := h.tasks.restarts[0]
	h.tasks.mu.Unlock()
	if !strings.Contains(reason, `check "probe" was critical 3 times`) {
		t.Errorf("restart reason %q", reason)
	}
}

func TestRefusedRegistrationDoesNotBlockOthers(t *testing.T) {
	bad := ServiceID(node, "bad", "api", 0, "web")
	h := start(t, Config{}, func(h *harness) {
		h.consul.refuse[bad] = api.StatusError{Code: 400, Body: "Invalid service"}
	})
	h.send(instanceOf("bad", webTask(), 0, running("")), running(""))
	h.send(instanceOf("good", webTask(), 0, running("")), running(""))
	eventually(t, "good service", func() bool { return h.consul.has(ServiceID(node, "good", "api", 0, "web")) })
	if h.consul.has(bad) {
		t.Fatal("refused service present")
	}
}

// TestRestartIsWarningNotCritical: systemd passes through failed and
// inactive on its way through a restart; the check goes warning, then
// passing, never critical. A failure that is not followed by a restart
// shows critical after the hold.
func TestRestartIsWarningNotCritical(t *testing.T) {
	h := start(t, Config{}, nil)
	task := webTask()
	task.Restart = jobspec.RestartPolicy{Attempts: 3, Interval: time.Hour, Delay: time.Second, Mode: jobspec.RestartModeFail}
	in := instanceOf("web", task, 0, running(""))
	cid := CheckID(ServiceID(node, "web", "api", 0, "web"), "ttl")
	up := running("")
	h.send(in, up)
	h.waitStatus(cid, api.HealthPassing, "running")

	step := func(active, sub, result string) units.State {
		st := up
		st.ActiveState, st.SubState, st.Result = active, sub, result
		st.ExecMainCode, st.ExecMainStatus = units.CodeKilled, 9
		return st
	}
	h.send(in, step("failed", "failed", "signal"))
	h.send(in, step("activating", "auto-restart", "signal"))
	h.waitStatus(cid, api.HealthWarning, "auto-restart")
	time.Sleep(2 * restartHold)
	h.send(in, step("inactive", "dead", "success"))
	h.send(in, step("activating", "start", "success"))
	h.send(in, running(""))
	h.waitStatus(cid, api.HealthPassing, "running")
	if got := h.consul.statuses(cid); !slices.Equal(got, []string{api.HealthPassing, api.HealthWarning, api.HealthPassing}) {
		t.Fatalf("statuses %v, want passing, warning, passing", got)
	}

	// The start limit is hit: auto-restart, then failed for good.
	h.send(in, step("activating", "auto-restart", "signal"))
	h.send(in, step("failed", "failed", "start-limit-hit"))
	h.waitStatus(cid, api.HealthCritical, "start-limit-hit")
	// A clean stop that systemd does not restart: critical after the hold.
	h.send(in, running(""))
	h.waitStatus(cid, api.HealthPassing, "running")
	h.send(in, step("inactive", "dead", "success"))
	h.waitStatus(cid, api.HealthCritical, "inactive (dead)")
}

// TestCheckRestartOfConsulCheck: an http check run by Consul is read once
// per interval; critical results in a row restart the task.
func TestCheckRestartOfConsulCheck(t *testing.T) {
	h := start(t, Config{}, nil)
	task := webTask(jobspec.Service{Name: "web", Port: "http", Checks: []jobspec.Check{{
		Name: "http", Type: jobspec.CheckHTTP, Port: "http", Path: "/", Method: "GET", Protocol: "http",
		Interval: time.Second, Timeout: time.Second, CheckRestart: &jobspec.CheckRestart{Limit: 2},
	}}})
	in := instanceOf("web", task, 0, running(""))
	cid := CheckID(ServiceID(node, "web", "api", 0, "web"), "http")
	h.send(in, running(""))
	eventually(t, "http check registered", func() bool { s, _ := h.consul.status(cid); return s != "" })
	// Consul's checks start critical: nothing happens while they pass.
	h.consul.mu.Lock()
	h.consul.checks[cid].Status = api.HealthPassing
	h.consul.mu.Unlock()
	select {
	case <-h.tasks.restarted:
		t.Fatal("restarted while the check passes")
	case <-time.After(2500 * time.Millisecond):
	}
	h.consul.mu.Lock()
	h.consul.checks[cid].Status = api.HealthCritical
	h.consul.mu.Unlock()
	select {
	case <-h.tasks.restarted:
	case <-time.After(5 * time.Second):
		t.Fatal("no restart after 2 critical results")
	}
}

// TestAgentRestartAdoptsRegistrations: a new bridge (the agent restarted)
// finds its services in Consul as it wants them: it registers nothing
// again, the checks stay passing, and it deregisters nothing during the
// probation.
func TestAgentRestartAdoptsRegistrations(t *testing.T) {
	consul := newFakeConsul()
	tasks := newFakeTasks()
	in := instanceOf("web", webTask(), 0, running(""))
	tasks.set(in)
	stale := ServiceID(node, "gone", "api", 0, "web")
	first := start(t, Config{}, func(h *harness) { h.consul, h.tasks = consul, tasks })
	cid := CheckID(ServiceID(node, "web", "api", 0, "web"), "ttl")
	first.waitStatus(cid, api.HealthPassing, "running")
	consul.mu.Lock()
	consul.services[stale] = &api.AgentService{ID: stale, Service: "web", Meta: map[string]string{MetaSource: "unitvisor"}}
	consul.mu.Unlock()

	consul.resetCalls()
	second := start(t, Config{SyncInterval: 20 * time.Millisecond, Probation: time.Hour}, func(h *harness) { h.consul, h.tasks = consul, tasks })
	eventually(t, "a few syncs", func() bool { return consul.callCounts()["services"] >= 3 })
	eventually(t, "status re-pushed once", func() bool { return consul.callCounts()["check_update"] >= 1 })
	calls := consul.callCounts()
	if calls["register"] != 0 || calls["deregister"] != 0 {
		t.Errorf("after a restart the bridge made calls %v; want no (de)registration", calls)
	}
	if got := consul.statuses(cid); slices.ContainsFunc(got, func(s string) bool { return s != api.HealthPassing }) {
		t.Errorf("check statuses %v across the restart", got)
	}
	second.waitStatus(cid, api.HealthPassing, "running")
	if !consul.has(stale) {
		t.Error("reaped during probation")
	}
}
