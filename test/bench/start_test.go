//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/drivers/rawexec"
	"github.com/unitvisor/unitvisor/internal/sdtest"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

const nTasks = 100

// waitActive polls until n units matching pattern are active.
func waitActive(b *testing.B, conn *units.Conn, pattern string, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := conn.List(context.Background(), pattern)
		if err != nil {
			b.Fatal(err)
		}
		active := 0
		for _, u := range list {
			if u.ActiveState == "active" {
				active++
			}
		}
		if active == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%d units %s not active in time", n, pattern)
}

// plainClient issues nTasks StartTransientUnit calls back to back over one
// go-systemd connection, then waits for every start job: the physical limit.
// With same set, each unit carries exactly the properties unitvisor's
// raw_exec driver would give it, which isolates the agent's own overhead
// from what systemd spends on the richer units.
// With watch set, a units.Watcher is subscribed meanwhile, as in the agent:
// a subscriber makes systemd emit PropertiesChanged for every transition.
func plainClient(b *testing.B, conn *units.Conn, same, watch bool) time.Duration {
	namer := sdtest.Prefix(b)
	sd, err := sddbus.NewSystemConnectionContext(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer sd.Close()
	specs := make([][]sddbus.Property, nTasks)
	dir := b.TempDir()
	for i := range nTasks {
		name, _ := namer.Name("plain", "t"+strconv.Itoa(i), 0)
		specs[i] = []sddbus.Property{sddbus.PropExecStart([]string{"/bin/sleep", "600"}, false),
			sddbus.PropType("exec"), sddbus.PropSlice("unitvisor.slice")}
		if same {
			task := &jobspec.Task{Name: "t" + strconv.Itoa(i), Driver: "raw_exec", Count: 1,
				Config:     jobspec.Config{Command: "/bin/sleep", Args: []string{"600"}},
				Restart:    jobspec.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"},
				KillSignal: "SIGTERM", KillTimeout: 5 * time.Second}
			job := &jobspec.Job{Name: "plain", Tasks: []*jobspec.Task{task}}
			td := filepath.Join(dir, task.Name)
			spec, err := rawexec.Driver{}.Prepare(context.Background(), drivers.Instance{Job: job, Task: task, Unit: name,
				Slice: "unitvisor.slice", TaskDir: td, Vars: jobspec.VarsFor(job, task, 0, td, name, nil)})
			if err != nil {
				b.Fatal(err)
			}
			specs[i] = spec.Properties
		}
	}
	if watch {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := units.NewWatcher(conn, namer, time.Minute, sdtest.Logger(b))
		go w.Run(ctx)
		<-w.Synced()
		go func() {
			for range w.Events() {
			}
		}()
	}
	start := time.Now()
	chans := make([]chan string, nTasks)
	for i := range nTasks {
		name, _ := namer.Name("plain", "t"+strconv.Itoa(i), 0)
		chans[i] = make(chan string, 1)
		if _, err := sd.StartTransientUnitContext(context.Background(), name, "fail", specs[i], chans[i]); err != nil {
			b.Fatal(err)
		}
	}
	for _, ch := range chans {
		if r := <-ch; r != "done" {
			b.Fatalf("start job: %s", r)
		}
	}
	waitActive(b, conn, namer.Pattern(), nTasks)
	d := time.Since(start)
	sdtest.Cleanup(b, namer.Prefix)
	return d
}

// systemdRun starts nTasks units with `systemd-run --no-block` in a loop.
func systemdRun(b *testing.B, conn *units.Conn) time.Duration {
	namer := sdtest.Prefix(b)
	start := time.Now()
	for i := range nTasks {
		name, _ := namer.Name("run", "t"+strconv.Itoa(i), 0)
		out, err := exec.Command("systemd-run", "--no-block", "--quiet", "--unit", name, "-p", "Type=exec", "--slice", "unitvisor.slice", "/bin/sleep", "600").CombinedOutput()
		if err != nil {
			b.Fatalf("systemd-run: %v %s", err, out)
		}
	}
	waitActive(b, conn, namer.Pattern(), nTasks)
	d := time.Since(start)
	sdtest.Cleanup(b, namer.Prefix)
	return d
}

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return 0
}

// agentResult is what one run through the agent measured.
type agentResult struct {
	took time.Duration
	// firstKiB is the RSS growth of a fresh agent over its first 100 tasks:
	// mostly the Go runtime growing its heap for the start burst.
	firstKiB int
	// marginalB is the RSS growth per task for 100 more tasks (a second
	// job) once the runtime is warm: what each task costs the agent.
	marginalB int
	procs     float64
}

func benchJob(name, driver string) string {
	var job strings.Builder
	fmt.Fprintf(&job, "job %q {\n", name)
	for i := range nTasks {
		fmt.Fprintf(&job, "  task \"t%d\" {\n    driver = %q\n    config {\n      command = \"/bin/sleep\"\n      args = [\"600\"]\n    }\n  }\n", i, driver)
	}
	job.WriteString("}\n")
	return job.String()
}

// throughAgent submits one job of nTasks single-instance tasks and waits
// until all their units are active; then a second one, for memory.
func throughAgent(b *testing.B, conn *units.Conn, driver string) agentResult {
	a := sdtest.StartAgent(b, `driver "raw_exec" { enabled = true }`)
	file := sdtest.WriteJob(b, "bench.hcl", benchJob("bench", driver))
	time.Sleep(500 * time.Millisecond) // let the idle agent settle
	before := rssKiB(b, a.PID())
	start := time.Now()
	a.MustCLI("job", "run", "-detach", file)
	waitActive(b, conn, a.Prefix+"-*", nTasks)
	res := agentResult{took: time.Since(start)}
	// Memory is measured once the start burst's garbage is collected.
	time.Sleep(3 * time.Second)
	first := rssKiB(b, a.PID())
	res.firstKiB = first - before

	a.MustCLI("job", "run", "-detach", sdtest.WriteJob(b, "bench2.hcl", benchJob("bench2", driver)))
	waitActive(b, conn, a.Prefix+"-*", 2*nTasks)
	time.Sleep(3 * time.Second)
	res.marginalB = (rssKiB(b, a.PID()) - first) * 1024 / nTasks

	// Processes per task: everything in each unit's cgroup.
	procs := 0
	for i := range nTasks {
		n, _ := strconv.Atoi(sdtest.Show(b, a.Unit("bench", "t"+strconv.Itoa(i), 0), "TasksCurrent"))
		procs += n
	}
	res.procs = float64(procs) / nTasks
	children, _ := exec.Command("pgrep", "-c", "-P", strconv.Itoa(a.PID())).Output()
	if c := strings.TrimSpace(string(children)); c != "0" {
		b.Errorf("agent has %s child processes; want none", c)
	}
	a.MustCLI("job", "stop", "bench")
	a.MustCLI("job", "stop", "bench2")
	a.Kill()
	return res
}

// rounds: each scenario runs this many times, interleaved, and the median
// is reported; single runs on this 2-core machine vary by +-30%.
const rounds = 3

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkStart100 prints, from one run: unitvisor's time to bring 100
// tasks up against a plain go-systemd client and a systemd-run loop, the
// agent's memory per task and the processes per task.
func BenchmarkStart100(b *testing.B) {
	conn := sdtest.Conn(b)
	for range b.N {
		var plainD, sameD, watchedD, runD, rawD, exD []time.Duration
		var raw1, ex1 agentResult
		for range rounds {
			plainD = append(plainD, plainClient(b, conn, false, false))
			sameD = append(sameD, plainClient(b, conn, true, false))
			watchedD = append(watchedD, plainClient(b, conn, true, true))
			runD = append(runD, systemdRun(b, conn))
			raw1 = throughAgent(b, conn, "raw_exec")
			rawD = append(rawD, raw1.took)
			ex1 = throughAgent(b, conn, "exec")
			exD = append(exD, ex1.took)
		}
		plain, same, watched, run, raw, ex := median(plainD), median(sameD), median(watchedD), median(runD), median(rawD), median(exD)
		b.ReportMetric(float64(plain.Milliseconds()), "plain-ms")
		b.ReportMetric(float64(run.Milliseconds()), "systemd-run-ms")
		b.ReportMetric(float64(raw.Milliseconds()), "unitvisor-raw_exec-ms")
		b.ReportMetric(float64(raw)/float64(plain), "raw_exec/plain")
		b.ReportMetric(float64(raw)/float64(watched), "raw_exec/plain-watched")
		b.ReportMetric(float64(raw1.marginalB), "agent-bytes/task")
		fmt.Printf("\n100 tasks until all active (median of %d rounds):\n", rounds)
		fmt.Printf("  plain go-systemd client                       %8s  %v\n", plain.Round(time.Millisecond), plainD)
		fmt.Printf("  plain client, unitvisor's raw_exec properties %8s  %v\n", same.Round(time.Millisecond), sameD)
		fmt.Printf("  ... and a subscribed watcher                  %8s  %v\n", watched.Round(time.Millisecond), watchedD)
		fmt.Printf("  systemd-run --no-block loop                   %8s  %v\n", run.Round(time.Millisecond), runD)
		fmt.Printf("  unitvisor raw_exec                            %8s  %v\n", raw.Round(time.Millisecond), rawD)
		fmt.Printf("      %.2fx plain, %.2fx same properties, %.2fx same + watcher; %.2f processes/task\n",
			float64(raw)/float64(plain), float64(raw)/float64(same), float64(raw)/float64(watched), raw1.procs)
		fmt.Printf("      agent RSS: +%d KiB for the first 100 tasks (runtime warm-up), +%d B/task for 100 more\n", raw1.firstKiB, raw1.marginalB)
		fmt.Printf("  unitvisor exec                                %8s  %v\n", ex.Round(time.Millisecond), exD)
		fmt.Printf("      %.2fx plain; %.2f processes/task\n", float64(ex)/float64(plain), ex1.procs)
		fmt.Printf("      agent RSS: +%d KiB for the first 100 tasks (runtime warm-up), +%d B/task for 100 more\n", ex1.firstKiB, ex1.marginalB)
	}
}
