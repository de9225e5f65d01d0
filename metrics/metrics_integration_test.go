//go:build integration

package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

const agentConfig = `driver "raw_exec" { enabled = true }
metrics {
  address        = "127.0.0.1:0"
  usage_interval = "1s"
}
`

// goldenJob: two sleeping instances with a memory limit, and one that
// exits 3 (after its start job is done, so it has a start time) and is not
// restarted. The sleeping ones hold a few MB in the shell once they have
// run a second: a bare sleep's 200 KB were once seen accounted as 0 for a
// whole minute in the sandbox (v1 memory controller).
const goldenJob = `job "golden" {
  task "sleep" {
    driver = "raw_exec"
    count  = 2
    config {
      command = "/bin/sh"
      args    = ["-c", "sleep 1; x=$(seq 1 300000); sleep 600"]
    }
    resources {
      memory = 64
    }
  }
  task "exits" {
    driver = "raw_exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "sleep 0.5; exit 3"]
    }
    restart {
      attempts = 0
    }
  }
}
`

func get(t *testing.T, u string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v\n%s", u, resp.StatusCode, err, b)
	}
	return string(b)
}

// waitFor scrapes until every sample (name + label text -> value) is there.
func waitFor(t *testing.T, metricsURL string, want map[string]string) string {
	t.Helper()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		last = get(t, metricsURL)
		ok := true
		for series, v := range want {
			name, labels, _ := strings.Cut(series, "{")
			if labels != "" {
				labels = "{" + labels
			}
			if sample(last, name, labels) != v {
				ok = false
				break
			}
		}
		if ok {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %v in:\n%s", want, ours(last))
	return ""
}

func sleepLabels(i int) string {
	return fmt.Sprintf(`{driver="raw_exec",instance="%d",job="golden",task="sleep"}`, i)
}

const exitsLabels = `{driver="raw_exec",instance="0",job="golden",task="exits"}`

func stateLabels(task string, i int, state string) string {
	return fmt.Sprintf(`{driver="raw_exec",instance="%d",job="golden",state="%s",task="%s"}`, i, state, task)
}

// TestAgentMetrics runs a fixed job through a real agent and checks its
// /metrics: against a golden file (volatile values normalised), with
// promtool, and through a real Prometheus server that scrapes it.
func TestAgentMetrics(t *testing.T) {
	a := sdtest.StartAgent(t, agentConfig)
	a.MustCLI("job", "run", "-detach", sdtest.WriteJob(t, "golden.hcl", goldenJob))
	murl := a.MetricsURL()
	settled := map[string]string{
		"unitvisor_job_running_instances" + `{job="golden"}`:        "2",
		"unitvisor_task_state" + stateLabels("exits", 0, "failed"):  "1",
		"unitvisor_task_memory_limit_bytes" + sleepLabels(0):        "6.7108864e+07",
		"unitvisor_task_memory_limit_bytes" + sleepLabels(1):        "6.7108864e+07",
		"unitvisor_task_last_exit_code" + exitsLabels:               "3",
		"unitvisor_task_state" + stateLabels("sleep", 1, "running"): "1",
	}
	waitFor(t, murl, settled)
	for i := range 2 {
		// The shell's 300000 numbers are ~2 MB.
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, _ := strconv.ParseFloat(sample(get(t, murl), "unitvisor_task_memory_bytes", sleepLabels(i)), 64)
			if v > 1<<20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sleep %d: memory %v, want > 1 MB; the unit's memory cgroup:\n%s", i, v, memoryCgroup(t, a.Unit("golden", "sleep", i)))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	got := waitFor(t, murl, settled)
	if v, _ := strconv.ParseFloat(sample(got, "unitvisor_dbus_call_duration_seconds_count", `{method="StartTransientUnit"}`), 64); v < 3 {
		t.Errorf("StartTransientUnit calls: %v, want >= 3", v)
	}
	golden(t, "agent.golden", normalise(ours(got),
		// Readings and timings; which D-Bus calls the watcher needed.
		"unitvisor_task_memory_bytes", "unitvisor_task_cpu_seconds_total", "unitvisor_task_start_time_seconds", "unitvisor_task_kernel_tasks",
		"unitvisor_reconcile_duration_seconds", "unitvisor_dbus_call_duration_seconds", "unitvisor_dbus_call_errors_total",
		"unitvisor_watcher_events_total", "unitvisor_usage_refresh_duration_seconds"))

	t.Run("promtool", func(t *testing.T) {
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = strings.NewReader(get(t, murl))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	})

	t.Run("prometheus", func(t *testing.T) {
		prom := startPrometheus(t, strings.TrimSuffix(strings.TrimPrefix(murl, "http://"), "/metrics"))
		// The agent's job and instance labels arrive as exported_job and
		// exported_instance: Prometheus keeps its own target labels.
		mem := prom.waitQuery(t, `unitvisor_task_memory_bytes{exported_job="golden",task="sleep"} > 1e6`, 2)
		state := prom.waitQuery(t, `unitvisor_task_state{exported_job="golden",task="sleep",state="running"} == 1`, 2)
		for _, r := range append(mem, state...) {
			if r.Metric["driver"] != "raw_exec" || r.Metric["job"] != "unitvisor" {
				t.Errorf("series %v: want driver raw_exec and the target's job label", r.Metric)
			}
		}
	})

	t.Run("stopped job leaves no series", func(t *testing.T) {
		a.MustCLI("job", "stop", "golden")
		var expo string
		sdtest.Eventually(t, 15*time.Second, "no series of job golden", func() bool {
			expo = get(t, murl)
			return !strings.Contains(expo, `job="golden"`)
		})
		if v := sample(expo, "unitvisor_jobs", `{state="stopped"}`); v != "1" {
			t.Errorf("stopped jobs: %q, want 1", v)
		}
	})
}

// memoryCgroup describes a unit's v1 memory cgroup and where its processes
// are, for a failure message.
func memoryCgroup(t *testing.T, unit string) string {
	dir := filepath.Join("/sys/fs/cgroup/memory/unitvisor.slice", unit)
	var b strings.Builder
	for _, f := range []string{"memory.usage_in_bytes", "memory.limit_in_bytes", "cgroup.procs"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		fmt.Fprintf(&b, "%s: %q %v\n", f, data, err)
	}
	pid := sdtest.Show(t, unit, "MainPID")
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	fmt.Fprintf(&b, "/proc/%s/cgroup: %s %v\nMemoryCurrent=%s\n", pid, data, err, sdtest.Show(t, unit, "MemoryCurrent"))
	return b.String()
}

// TestAgentRestartCounter: the restart counter of a task survives kill -9
// of the agent, the replacement of its unit (whose NRestarts starts from
// 0), and both together.
func TestAgentRestartCounter(t *testing.T) {
	a := sdtest.StartAgent(t, agentConfig)
	job := func(marker string) string {
		return fmt.Sprintf(`job "crashy" {
  task "c" {
    driver = "raw_exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "sleep 0.2; exit 1 # %s"]
    }
    restart {
      attempts = 2
      interval = "10m"
      delay    = "200ms"
    }
  }
}
`, marker)
	}
	const labels = `{driver="raw_exec",instance="0",job="crashy",task="c"}`
	failed := `{driver="raw_exec",instance="0",job="crashy",state="failed",task="c"}`
	unit := a.Unit("crashy", "c", 0)
	seen := 0.0
	// restarts scrapes until the task has failed (its restarts used up)
	// and, once systemd's NRestarts has settled, until the counter is
	// base plus that NRestarts. No reading may go below an earlier one.
	// Only readings above after count: a replaced unit must have started
	// (and restarted once) before its failed state means anything.
	restarts := func(base, after float64) float64 {
		t.Helper()
		murl := a.MetricsURL()
		deadline := time.Now().Add(60 * time.Second)
		want := -1.0
		for {
			expo := get(t, murl)
			if s := sample(expo, "unitvisor_task_restarts_total", labels); s != "" {
				v, _ := strconv.ParseFloat(s, 64)
				if v < seen {
					t.Fatalf("restarts went back from %v to %v", seen, v)
				}
				seen = v
				if v > after && sample(expo, "unitvisor_task_state", failed) == "1" {
					if want < 0 {
						// The failed state can come a signal before the
						// last NRestarts (the refused restart counts).
						time.Sleep(time.Second)
						n, err := strconv.Atoi(sdtest.Show(t, unit, "NRestarts"))
						if err != nil {
							t.Fatal(err)
						}
						want = base + float64(n)
					}
					if v == want {
						return v
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for task crashy/c to fail with %v restarts (last %v):\n%s", want, seen, ours(expo))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	a.MustCLI("job", "run", "-detach", sdtest.WriteJob(t, "crashy.hcl", job("v1")))
	r1 := restarts(0, 0)
	if r1 < 2 {
		t.Fatalf("restarts of a task with 2 attempts: %v, want >= 2", r1)
	}
	a.Kill() // SIGKILL
	a.Start()
	if r := restarts(0, 0); r != r1 {
		t.Fatalf("after kill -9 and restart: %v restarts, want %v", r, r1)
	}
	// A new definition replaces the unit: its NRestarts starts from 0.
	a.MustCLI("job", "run", "-detach", sdtest.WriteJob(t, "crashy2.hcl", job("v2")))
	r2 := restarts(r1, r1)
	time.Sleep(1500 * time.Millisecond) // the counters are saved once a second
	a.Kill()
	a.Start()
	// The new unit alone knows only its own NRestarts: the rest comes from
	// the state file.
	if r := restarts(r1, r1); r != r2 {
		t.Fatalf("after replacement, kill -9 and restart: %v restarts, want %v", r, r2)
	}
	if b, err := os.ReadFile(filepath.Join(a.DataDir, "metrics.json")); err != nil || !bytes.Contains(b, []byte(`"crashy"`)) {
		t.Fatalf("state file: %v\n%s", err, b)
	}
}

// prometheus is a Prometheus server started by a test.
type prometheus struct {
	url string
}

type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// startPrometheus runs Debian's prometheus on a free loopback port with
// its own config and data dir, scraping target every second.
func startPrometheus(t *testing.T, target string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not installed (.ci/run installs Debian's prometheus package)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: unitvisor
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	p := &prometheus{url: "http://" + addr}
	sdtest.Eventually(t, 30*time.Second, "prometheus ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// waitQuery runs an instant PromQL query until it returns n series.
func (p *prometheus) waitQuery(t *testing.T, query string, n int) []promResult {
	t.Helper()
	var last string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(query))
		if err == nil {
			var body struct {
				Status string `json:"status"`
				Data   struct {
					Result []promResult `json:"result"`
				} `json:"data"`
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if json.Unmarshal(b, &body) == nil && body.Status == "success" && len(body.Data.Result) == n {
				return body.Data.Result
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	targets := ""
	if resp, err := http.Get(p.url + "/api/v1/targets"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		targets = string(b)
	}
	t.Fatalf("query %s: no %d series in time; last answer: %s\ntargets: %s", query, n, last, targets)
	return nil
}
