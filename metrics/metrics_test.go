package metrics_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/metrics"
	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

const slice = "unitvisor.slice"

// fakeUsage serves fixed readings by unit and counts reads.
type fakeUsage struct {
	mu    sync.Mutex
	by    map[string]units.Usage // unit name -> usage
	reads int
}

func (f *fakeUsage) Usage(cgroup string) (units.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	u, ok := f.by[filepath.Base(cgroup)]
	if !ok || filepath.Dir(cgroup) != "/"+slice {
		return units.Usage{}, errors.New("no cgroup")
	}
	return u, nil
}

func (f *fakeUsage) set(unit string, u units.Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.by[unit] = u
}

func newMetrics(t testing.TB, stateFile string) (*metrics.Metrics, *fakeUsage) {
	t.Helper()
	fu := &fakeUsage{by: map[string]units.Usage{}}
	m := metrics.New(metrics.Config{Slice: slice, Usage: fu, StateFile: stateFile, Version: "1.2.3"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	return m, fu
}

func scrape(t testing.TB, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func record(name string, stopped bool, tasks ...*jobspec.Task) supervisor.JobRecord {
	return supervisor.JobRecord{Job: &jobspec.Job{Name: name, Tasks: tasks}, Stopped: stopped}
}

func task(name, driver string, count int) *jobspec.Task {
	return &jobspec.Task{Name: name, Driver: driver, Count: count}
}

func unit(job, task string, index int) string {
	n, _ := units.Namer{Prefix: "uv"}.Name(job, task, index)
	return n
}

func event(job, task string, index int, st units.State) supervisor.TaskEvent {
	st.Name = unit(job, task, index)
	return supervisor.TaskEvent{Job: job, Task: task, Index: index, State: st}
}

var (
	running = units.State{ActiveState: "active", SubState: "running", ActiveSince: time.Unix(1700000000, 250000000)}
	// autoRestart: exited 3, systemd restarts it after RestartSec.
	autoRestart = units.State{ActiveState: "activating", SubState: "auto-restart", Result: "exit-code",
		ExecMainCode: units.CodeExited, ExecMainStatus: 3, ActiveSince: time.Unix(1700000100, 0)}
)

// fixed is the job of the golden file: web/api (exec, 2 instances: one
// running, one restarting after exit 3), web/worker (raw_exec, no unit
// yet), and a stopped job that has no series.
func fixed(t testing.TB) *metrics.Metrics {
	m, fu := newMetrics(t, "")
	m.Reconciled(3*time.Millisecond, []supervisor.JobRecord{
		record("web", false, task("api", "exec", 2), task("worker", "raw_exec", 1)),
		record("old", true, task("gone", "exec", 1)),
	}, true)
	m.Observe(event("web", "api", 0, running))
	st := autoRestart
	st.NRestarts = 2
	m.Observe(event("web", "api", 1, st))
	fu.set(unit("web", "api", 0), units.Usage{MemoryBytes: 3 << 20, MemoryLimitBytes: 64 << 20, CPUNanos: 1_500_000_000, Tasks: 4})
	m.RefreshUsage()
	m.DBusCall("StartTransientUnit", 2*time.Millisecond, nil)
	m.DBusCall("StopUnit", 40*time.Millisecond, errors.New("boom"))
	m.DBusReconnect("signals")
	m.ConsulOp("register", 4*time.Millisecond, nil)
	m.ConsulOp("check_update", 700*time.Microsecond, errors.New("consul down"))
	m.QueueDepth(3)
	return m
}

// TestGolden pins the whole exposition of a fixed job: names, help, types,
// labels and values.
func TestGolden(t *testing.T) {
	got := scrape(t, fixed(t))
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes", "promhttp_metric_handler_requests_total"} {
		if !strings.Contains(got, "\n"+family+" ") && !strings.Contains(got, "\n"+family+"{") {
			t.Errorf("no %s in the exposition", family)
		}
	}
	golden(t, "fixed.golden", normalise(ours(got), "unitvisor_usage_refresh_duration_seconds"))
}

// TestRestartsNeverGoBack: NRestarts starts from 0 in a replaced unit (and
// after reset-failed), the watcher's OOM count after an agent restart; the
// counters add up instead, and keep their value in a new agent.
func TestRestartsNeverGoBack(t *testing.T) {
	state := filepath.Join(t.TempDir(), "metrics.json")
	jobs := []supervisor.JobRecord{record("web", false, task("api", "exec", 1))}
	restarts := func(m *metrics.Metrics) string {
		return sample(scrape(t, m), "unitvisor_task_restarts_total", `{driver="exec",instance="0",job="web",task="api"}`)
	}
	oom := func(m *metrics.Metrics) string {
		return sample(scrape(t, m), "unitvisor_task_oom_kills_total", `{driver="exec",instance="0",job="web",task="api"}`)
	}

	m, _ := newMetrics(t, state)
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan supervisor.TaskEvent)
	done := make(chan struct{})
	go func() { m.Run(ctx, events); close(done) }()
	m.Reconciled(time.Millisecond, jobs, true)
	st := running
	for _, n := range []uint32{0, 1, 2} {
		st.NRestarts = n
		events <- event("web", "api", 0, st)
	}
	st.OOMKills = 1
	events <- event("web", "api", 0, st)
	// The unit is replaced (a new definition): gone, then a new one.
	events <- event("web", "api", 0, units.State{Gone: true})
	st.NRestarts, st.OOMKills = 0, 0
	events <- event("web", "api", 0, st)
	st.NRestarts = 1
	events <- event("web", "api", 0, st)
	cancel()
	<-done
	if got := restarts(m); got != "3" {
		t.Fatalf("restarts after 2 + replacement + 1: %q, want 3", got)
	}
	if got := oom(m); got != "1" {
		t.Fatalf("oom kills: %q, want 1", got)
	}

	// A new agent: the unit kept running (NRestarts 1), the watcher's OOM
	// count starts again from 0; nothing goes back.
	m2, _ := newMetrics(t, state)
	m2.Reconciled(time.Millisecond, jobs, true)
	if got := restarts(m2); got != "3" {
		t.Fatalf("restarts after agent restart, before any event: %q, want 3", got)
	}
	st.NRestarts, st.OOMKills = 1, 0
	m2.Observe(event("web", "api", 0, st))
	if got, o := restarts(m2), oom(m2); got != "3" || o != "1" {
		t.Fatalf("after agent restart: restarts %q oom %q, want 3 and 1", got, o)
	}
	st.NRestarts = 2
	m2.Observe(event("web", "api", 0, st))
	if got := restarts(m2); got != "4" {
		t.Fatalf("restarts: %q, want 4", got)
	}
}

// TestOOMKillsFromCgroup: the cgroup's oom_kill counts while the cgroup
// lives; the larger of the two sources wins.
func TestOOMKillsFromCgroup(t *testing.T) {
	m, fu := newMetrics(t, "")
	m.Reconciled(time.Millisecond, []supervisor.JobRecord{record("web", false, task("api", "exec", 1))}, true)
	m.Observe(event("web", "api", 0, running))
	name := unit("web", "api", 0)
	labels := `{driver="exec",instance="0",job="web",task="api"}`
	for _, tc := range []struct {
		cgroup uint64
		want   string
	}{{2, "2"}, {3, "3"}, {0, "3"}, {1, "4"}} { // 0: a new cgroup
		fu.set(name, units.Usage{OOMKills: tc.cgroup})
		m.RefreshUsage()
		if got := sample(scrape(t, m), "unitvisor_task_oom_kills_total", labels); got != tc.want {
			t.Fatalf("cgroup oom_kill %d: got %q, want %s", tc.cgroup, got, tc.want)
		}
	}
}

// TestStoppedJobsDisappear: after the reconcile that sees a job stopped,
// none of its series remain; a job run again starts new counters.
func TestStoppedJobsDisappear(t *testing.T) {
	m := fixed(t)
	if !strings.Contains(scrape(t, m), `job="web"`) {
		t.Fatal("no series of job web")
	}
	m.Observe(event("web", "api", 0, units.State{Gone: true}))
	m.Observe(event("web", "api", 1, units.State{Gone: true}))
	m.Reconciled(time.Millisecond, []supervisor.JobRecord{record("web", true, task("api", "exec", 2))}, true)
	got := scrape(t, m)
	if strings.Contains(got, `job="web"`) {
		t.Fatalf("series of stopped job web remain:\n%s", grep(got, `job="web"`))
	}
	if v := sample(got, "unitvisor_jobs", `{state="stopped"}`); v != "1" {
		t.Fatalf("stopped jobs: %q, want 1", v)
	}
	// An unreadable store keeps what is known.
	m.Reconciled(time.Millisecond, nil, false)
	if v := sample(scrape(t, m), "unitvisor_jobs", `{state="stopped"}`); v != "1" {
		t.Fatalf("after a failed reconcile: stopped jobs %q, want 1", v)
	}
	m.Reconciled(time.Millisecond, []supervisor.JobRecord{record("web", false, task("api", "exec", 1))}, true)
	st := running
	st.NRestarts = 1
	m.Observe(event("web", "api", 0, st))
	got = scrape(t, m)
	if v := sample(got, "unitvisor_task_restarts_total", `{driver="exec",instance="0",job="web",task="api"}`); v != "1" {
		t.Fatalf("restarts of the job run again: %q, want 1 (no counters kept from before the stop)", v)
	}
	if strings.Contains(got, `instance="1"`) {
		t.Fatal("instance 1 is no longer desired but has series")
	}
}

// TestScrapeReadsNothing: a scrape serves memory; cgroups are read by
// RefreshUsage (the timer) only.
func TestScrapeReadsNothing(t *testing.T) {
	m, fu := newMetrics(t, "")
	m.Reconciled(time.Millisecond, []supervisor.JobRecord{record("web", false, task("api", "exec", 3))}, true)
	for i := range 3 {
		m.Observe(event("web", "api", i, running))
	}
	m.RefreshUsage()
	if fu.reads != 3 {
		t.Fatalf("one refresh read %d cgroups, want 3 (one per unit)", fu.reads)
	}
	for range 5 {
		scrape(t, m)
	}
	if fu.reads != 3 {
		t.Fatalf("scrapes read cgroups: %d reads, want still 3", fu.reads)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkScrape1000 scrapes 1000 running instances with usage, as
// Prometheus does (text format, gzip).
func BenchmarkScrape1000(b *testing.B) {
	m, fu := newMetrics(b, "")
	var tasks []*jobspec.Task
	for i := range 100 {
		tasks = append(tasks, task("t"+string(rune('a'+i%26))+string(rune('a'+i/26)), "raw_exec", 10))
	}
	m.Reconciled(time.Millisecond, []supervisor.JobRecord{record("bench", false, tasks...)}, true)
	for _, t := range tasks {
		for i := range t.Count {
			m.Observe(event("bench", t.Name, i, running))
			fu.set(unit("bench", t.Name, i), units.Usage{MemoryBytes: 1 << 20, CPUNanos: 1e9, Tasks: 1})
		}
	}
	m.RefreshUsage()
	h := m.Handler()
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// TestExposition: the body parses as Prometheus's text format, and gzip
// (which Prometheus asks for) gives the same families.
func TestExposition(t *testing.T) {
	m := fixed(t)
	plain := scrape(t, m)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(plain)); err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "deflate, gzip;q=0.9")
	m.Handler().ServeHTTP(rec, req)
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", rec.Header().Get("Content-Encoding"))
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	volatile := []string{"unitvisor_usage_refresh_duration_seconds"}
	if a, b := normalise(ours(plain), volatile...), normalise(ours(string(unzipped)), volatile...); a != b {
		t.Fatalf("gzip body differs:\n%s", diff(a, b))
	}
	req.Header.Set("Accept-Encoding", "gzip;q=0")
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, req)
	if rec.Header().Get("Content-Encoding") != "" {
		t.Fatal("gzip;q=0 must not get gzip")
	}
}
