package consulbridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

// fakeConsul is an in-memory Consul agent.
type fakeConsul struct {
	mu       sync.Mutex
	down     bool
	refuse   map[string]error // service ID -> error Register returns
	services map[string]*api.AgentService
	checks   map[string]*api.AgentCheck
	calls    map[string]int
	changed  chan struct{}
	history  map[string][]string // check ID -> statuses it had, in order
}

func newFakeConsul() *fakeConsul {
	return &fakeConsul{
		services: map[string]*api.AgentService{}, checks: map[string]*api.AgentCheck{},
		calls: map[string]int{}, refuse: map[string]error{}, changed: make(chan struct{}, 1),
		history: map[string][]string{},
	}
}

var errConnRefused = errors.New("dial tcp 127.0.0.1:8500: connect: connection refused")

func (f *fakeConsul) enter(op string) error {
	f.calls[op]++
	if f.down {
		return errConnRefused
	}
	return nil
}

func (f *fakeConsul) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeConsul) Register(_ context.Context, reg *api.AgentServiceRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("register"); err != nil {
		return err
	}
	if err := f.refuse[reg.ID]; err != nil {
		return err
	}
	f.services[reg.ID] = &api.AgentService{ID: reg.ID, Service: reg.Name, Tags: reg.Tags, Meta: reg.Meta, Port: reg.Port, Address: reg.Address}
	for id, c := range f.checks {
		if c.ServiceID == reg.ID {
			delete(f.checks, id)
		}
	}
	for _, c := range reg.Checks {
		typ, status := "ttl", c.Status
		switch {
		case c.HTTP != "":
			typ = "http"
		case c.TCP != "":
			typ = "tcp"
		}
		if status == "" {
			status = api.HealthCritical
		}
		f.checks[c.CheckID] = &api.AgentCheck{CheckID: c.CheckID, Name: c.Name, ServiceID: reg.ID, Type: typ, Status: status}
		f.record(c.CheckID, status)
	}
	f.notify()
	return nil
}

func (f *fakeConsul) Deregister(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("deregister"); err != nil {
		return err
	}
	delete(f.services, id)
	for cid, c := range f.checks {
		if c.ServiceID == id {
			delete(f.checks, cid)
		}
	}
	f.notify()
	return nil
}

func (f *fakeConsul) UpdateTTL(_ context.Context, checkID, status, output string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("check_update"); err != nil {
		return err
	}
	c := f.checks[checkID]
	if c == nil {
		return fmt.Errorf("update check %s: %w", checkID, api.StatusError{Code: 404, Body: "Unknown check ID"})
	}
	c.Status, c.Output = status, output
	f.record(checkID, status)
	f.notify()
	return nil
}

func (f *fakeConsul) Services(context.Context) (map[string]*api.AgentService, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("services"); err != nil {
		return nil, err
	}
	out := map[string]*api.AgentService{}
	for id, s := range f.services {
		cp := *s
		out[id] = &cp
	}
	return out, nil
}

func (f *fakeConsul) Checks(context.Context) (map[string]*api.AgentCheck, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("checks"); err != nil {
		return nil, err
	}
	out := map[string]*api.AgentCheck{}
	for id, c := range f.checks {
		cp := *c
		out[id] = &cp
	}
	return out, nil
}

func (f *fakeConsul) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *fakeConsul) status(checkID string) (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.checks[checkID]; c != nil {
		return c.Status, c.Output
	}
	return "", ""
}

func (f *fakeConsul) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.services[id] != nil
}

func (f *fakeConsul) callCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

func (f *fakeConsul) resetCalls() {
	f.mu.Lock()
	f.calls = map[string]int{}
	f.mu.Unlock()
}

// fakeTasks is the supervisor's side: instances by key.
type fakeTasks struct {
	mu        sync.Mutex
	insts     map[instKey]supervisor.Instance
	restarts  []string
	restarted chan struct{}
	spec      units.Spec
}

func newFakeTasks() *fakeTasks {
	return &fakeTasks{insts: map[instKey]supervisor.Instance{}, restarted: make(chan struct{}, 16)}
}

func (t *fakeTasks) set(in supervisor.Instance) {
	t.mu.Lock()
	t.insts[instKey{in.Job.Name, in.Task.Name, in.Index}] = in
	t.mu.Unlock()
}

func (t *fakeTasks) remove(job string) {
	t.mu.Lock()
	for k := range t.insts {
		if k.job == job {
			delete(t.insts, k)
		}
	}
	t.mu.Unlock()
}

func (t *fakeTasks) Instance(job, task string, index int) (supervisor.Instance, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in, ok := t.insts[instKey{job, task, index}]
	return in, ok, nil
}

func (t *fakeTasks) Instances() ([]supervisor.Instance, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []supervisor.Instance
	for _, in := range t.insts {
		out = append(out, in)
	}
	return out, nil
}

func (t *fakeTasks) InstanceSpec(context.Context, string, string, int) (units.Spec, error) {
	return t.spec, nil
}

func (t *fakeTasks) RestartTask(_ context.Context, job, task string, index int, reason string) error {
	t.mu.Lock()
	t.restarts = append(t.restarts, fmt.Sprintf("%s/%s/%d: %s", job, task, index, reason))
	t.mu.Unlock()
	t.restarted <- struct{}{}
	return nil
}

// fakeSystemd runs script checks by returning a fixed exit status.
type fakeSystemd struct {
	mu     sync.Mutex
	status int32
	runs   int
	specs  []units.Spec
}

func (s *fakeSystemd) Start(_ context.Context, spec units.Spec, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.specs = append(s.specs, spec)
	return nil
}

func (s *fakeSystemd) Fetch(_ context.Context, name string) (units.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return units.State{Name: name, ActiveState: "active", SubState: "exited", ExecMainCode: units.CodeExited, ExecMainStatus: s.status}, nil
}

func (s *fakeSystemd) Stop(context.Context, string, time.Duration) error { return nil }

func (s *fakeSystemd) setStatus(v int32) {
	s.mu.Lock()
	s.status = v
	s.mu.Unlock()
}

// countingObserver records the queue depth and ops.
type countingObserver struct {
	mu    sync.Mutex
	ops   map[string]int
	depth int
}

func (o *countingObserver) ConsulOp(op string, _ time.Duration, _ error) {
	o.mu.Lock()
	o.ops[op]++
	o.mu.Unlock()
}

func (o *countingObserver) QueueDepth(n int) {
	o.mu.Lock()
	o.depth = n
	o.mu.Unlock()
}

func (f *fakeConsul) record(checkID, status string) {
	h := f.history[checkID]
	if len(h) == 0 || h[len(h)-1] != status {
		f.history[checkID] = append(h, status)
	}
}

func (f *fakeConsul) statuses(checkID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.history[checkID]...)
}
