package consulbridge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

func TestUnitHealth(t *testing.T) {
	u := "uv-web-api@0.service"
	tests := []struct {
		st     units.State
		status string
		output string
	}{
		{units.State{ActiveState: "active", SubState: "running"}, api.HealthPassing, u + " is active (running)"},
		{units.State{ActiveState: "activating", SubState: "start"}, api.HealthWarning, u + " is activating (start)"},
		{units.State{ActiveState: "activating", SubState: "auto-restart", Result: "exit-code", ExecMainCode: units.CodeExited, ExecMainStatus: 2, NRestarts: 1},
			api.HealthWarning, u + " is activating (auto-restart): restarting after result exit-code, exit code 2 (1 restarts)"},
		{units.State{ActiveState: "reloading", SubState: "reload"}, api.HealthWarning, u + " is reloading (reload)"},
		{units.State{ActiveState: "deactivating", SubState: "stop-sigterm"}, api.HealthWarning, u + " is deactivating (stop-sigterm): stopping"},
		{units.State{ActiveState: "failed", SubState: "failed", Result: "signal", ExecMainCode: units.CodeKilled, ExecMainStatus: 9},
			api.HealthCritical, u + " is failed (failed): result signal, signal 9"},
		{units.State{ActiveState: "inactive", SubState: "dead"}, api.HealthCritical, u + " is inactive (dead): no exit status"},
		{units.State{ActiveState: "failed", SubState: "failed", Result: "exit-code", ExecMainCode: units.CodeExited, ExecMainStatus: 203},
			api.HealthCritical, u + " is failed (failed): result exit-code, exit code 203/EXEC"},
	}
	for _, tt := range tests {
		tt.st.Name = u
		if got := unitHealth(tt.st); got.Status != tt.status || got.Output != tt.output {
			t.Errorf("%s/%s: got %+v, want %s %q", tt.st.ActiveState, tt.st.SubState, got, tt.status, tt.output)
		}
	}
}

func TestRegistered(t *testing.T) {
	now := time.Now()
	task := webTask()
	in := func(mod func(*units.State)) (st units.State) {
		st = units.State{ActiveState: "active", SubState: "running", ActiveSince: now.Add(-time.Minute)}
		if mod != nil {
			mod(&st)
		}
		return st
	}
	tests := []struct {
		name     string
		st       units.State
		wanted   bool
		stopping time.Time
		want     bool
	}{
		{"running", in(nil), true, time.Time{}, true},
		{"not wanted", in(nil), false, time.Time{}, false},
		{"never active", in(func(s *units.State) { s.ActiveState, s.ActiveSince = "activating", time.Time{} }), true, time.Time{}, false},
		{"failed after running", in(func(s *units.State) { s.ActiveState = "failed" }), true, time.Time{}, true},
		{"restarting", in(func(s *units.State) { s.ActiveState, s.SubState = "activating", "auto-restart" }), true, time.Time{}, true},
		{"stopping", in(nil), true, now, false},
		{"started after stop", in(func(s *units.State) { s.ActiveSince = now.Add(time.Second) }), true, now, true},
		{"complete", in(func(s *units.State) { s.SubState = "exited" }), true, time.Time{}, false},
		{"gone", in(func(s *units.State) { s.Gone = true }), true, time.Time{}, false},
	}
	for _, tt := range tests {
		i := instanceOf("web", task, 0, tt.st)
		if got := registered(i, tt.wanted, tt.stopping); got != tt.want {
			t.Errorf("%s: registered = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBuildServices(t *testing.T) {
	task := &jobspec.Task{Name: "api", Ports: []jobspec.Port{{Label: "http"}, {Label: "admin"}}, Services: []jobspec.Service{{
		Name: "web", Port: "http", Tags: []string{"i${UNITVISOR_INDEX}"}, Meta: map[string]string{"unit": "${UNITVISOR_UNIT}"},
		Checks: []jobspec.Check{
			{Name: "http", Type: jobspec.CheckHTTP, Port: "http", Path: "/health", Method: "GET", Protocol: "http", Interval: 5 * time.Second, Timeout: time.Second},
			{Name: "tcp", Type: jobspec.CheckTCP, Port: "admin", Interval: 10 * time.Second, Timeout: 2 * time.Second},
			{Name: "ttl", Type: jobspec.CheckTTL},
		},
	}, {
		Name: "admin", Port: "admin", Address: "10.1.2.${UNITVISOR_INDEX}",
		Checks: []jobspec.Check{{Name: "tcp", Type: jobspec.CheckTCP, Port: "admin", Interval: 10 * time.Second, Timeout: 2 * time.Second}},
	}}}
	in := instanceOf("shop", task, 3, running(""))
	in.Ports = map[string]int{"http": 20001, "admin": 20002}
	in.Vars = jobspec.VarsFor(in.Job, task, 3, "/tasks", in.Unit, in.Ports)
	ds, scripts, restarts := buildServices(node, in, unitHealth(in.State), nil)
	if len(ds) != 2 || len(scripts) != 0 || len(restarts) != 0 {
		t.Fatalf("got %d services, %d scripts, %d restarts", len(ds), len(scripts), len(restarts))
	}
	web, admin := ds[0].reg, ds[1].reg
	if web.ID != "unitvisor:"+node+":shop:api:3:web" || web.Port != 20001 || web.Tags[0] != "i3" || web.Meta["unit"] != in.Unit {
		t.Errorf("web: %+v", web)
	}
	if web.Checks[0].HTTP != "http://127.0.0.1:20001/health" || web.Checks[1].TCP != "127.0.0.1:20002" || web.Checks[2].TTL != CheckTTL.String() {
		t.Errorf("web checks: %+v %+v %+v", web.Checks[0], web.Checks[1], web.Checks[2])
	}
	if ds[0].ttl[web.Checks[2].CheckID].Status != api.HealthPassing || len(ds[0].ttl) != 1 {
		t.Errorf("pushed checks: %+v", ds[0].ttl)
	}
	if admin.Address != "10.1.2.3" || admin.Checks[0].TCP != "10.1.2.3:20002" {
		t.Errorf("admin: %+v %+v", admin, admin.Checks[0])
	}
	for k, v := range map[string]string{MetaSource: "unitvisor", MetaNode: node, MetaJob: "shop", MetaTask: "api", MetaIndex: "3", MetaHash: ds[0].hash} {
		if web.Meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, web.Meta[k], v)
		}
	}
	// The hash ignores check statuses but not the definition.
	failed := instanceOf("shop", task, 3, units.State{ActiveState: "failed", ActiveSince: time.Now()})
	again, _, _ := buildServices(node, failed, unitHealth(failed.State), nil)
	in2 := in
	in2.Ports = map[string]int{"http": 20001, "admin": 20002}
	same, _, _ := buildServices(node, in2, unitHealth(in2.State), nil)
	if same[0].hash != ds[0].hash {
		t.Error("hash differs for the same definition")
	}
	if again[0].hash == ds[0].hash {
		t.Error("hash does not change with the port")
	}
}

func TestScriptHealth(t *testing.T) {
	exited := func(code int32) units.State {
		return units.State{ExecMainCode: units.CodeExited, ExecMainStatus: code}
	}
	tests := []struct {
		st     units.State
		err    error
		ran    bool
		out    string
		status string
		output string
	}{
		{exited(0), nil, true, "ok\n", api.HealthPassing, "ok\n"},
		{exited(1), errors.New("job failed"), true, "", api.HealthWarning, "exit code 1"},
		{exited(2), nil, true, "broken", api.HealthCritical, "broken"},
		{exited(203), nil, true, "", api.HealthCritical, "exit code 203/EXEC"},
		{units.State{Result: "timeout", ExecMainCode: units.CodeKilled, ExecMainStatus: 15}, nil, true, "slow", api.HealthCritical, "slow\n(timed out after 2s)"},
		{units.State{}, errors.New("no such user"), false, "", api.HealthCritical, "script check did not run: no such user"},
	}
	for _, tt := range tests {
		got := scriptHealth(tt.st, tt.err, tt.ran, tt.out, 2*time.Second)
		if got.Status != tt.status || got.Output != tt.output {
			t.Errorf("%+v: got %+v, want %s %q", tt.st, got, tt.status, tt.output)
		}
	}
}

func TestCut(t *testing.T) {
	long := strings.Repeat("é", maxOutput) // 2 bytes each
	got := cut(long)
	if len(got) > maxOutput || !utf8.ValidString(got) || len(got) < maxOutput-1 {
		t.Errorf("cut: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if cut("short") != "short" || cut("a\xffb") != "a\uFFFDb" {
		t.Error("cut changed a short or fixable string wrongly")
	}
}

func TestCheckUnitName(t *testing.T) {
	k := instKey{"web-front", "api", 2}
	got := checkUnitName("uv", k, CheckID(ServiceID(node, k.job, k.task, k.index, "web"), "probe"))
	if got != `uv-check-web\x2dfront-api-2-web-probe.service` {
		t.Errorf("checkUnitName = %q", got)
	}
	if _, _, _, err := (units.Namer{Prefix: "uv"}).Parse(got); err == nil {
		t.Error("a check unit parses as a task unit: the supervisor would reap it")
	}
	long := instKey{strings.Repeat("j", 63), strings.Repeat("t", 63), 999}
	got = checkUnitName("uv", long, CheckID(ServiceID(node, long.job, long.task, long.index, strings.Repeat("s", 63)), strings.Repeat("c", 63)))
	if len(got) > units.MaxNameLen || !strings.HasPrefix(got, "uv-check-") {
		t.Errorf("long name %q", got)
	}
}

func TestNodeID(t *testing.T) {
	dir := t.TempDir()
	id, err := NodeID(dir)
	if err != nil || !nodeIDRE.MatchString(id) {
		t.Fatalf("NodeID = %q, %v", id, err)
	}
	again, err := NodeID(dir)
	if err != nil || again != id {
		t.Fatalf("NodeID changed across calls: %q then %q (%v)", id, again, err)
	}
	if err := os.WriteFile(filepath.Join(dir, nodeIDFile), []byte("my-hostname\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeID(dir); err == nil {
		t.Fatal("a corrupt node-id file was accepted")
	}
}
