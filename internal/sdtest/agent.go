package sdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/supervisor"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/unitvisor once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		// Not under /tmp: units with PrivateTmp (qemu's ExecStop runs this
		// binary) would not see it there.
		dir, err := os.MkdirTemp("/var/lib", "uvbin-")
		if err == nil { // task users run it as the exec-task launcher
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "unitvisor")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/unitvisor/unitvisor/cmd/unitvisor").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Agent is a unitvisor agent process started by a test, with its own data
// dir, socket and unit prefix.
type Agent struct {
	t       testing.TB
	Bin     string
	Prefix  string
	DataDir string
	Socket  string
	Config  string
	cmd     *exec.Cmd
	log     *bytes.Buffer
}

// StartAgent starts an agent; extra is appended to its HCL config. The
// data dir lives under /var/lib, not /tmp: exec tasks get a private /tmp
// and would not see their task directories there.
func StartAgent(t testing.TB, extra string) *Agent {
	t.Helper()
	return StartAgentUnder(t, "/var/lib", extra)
}

// StartAgentUnder is StartAgent with the agent's directory (data dir,
// socket, config) in a new directory under parent: a test picks the
// filesystem its task directories live on (overlayfs accepts no
// overlayfs as upper layer, so docker tasks in the sandbox, whose /var is
// an overlay, get rootfs copies there and overlays under /srv).
func StartAgentUnder(t testing.TB, parent, extra string) *Agent {
	t.Helper()
	Conn(t) // fail early without systemd
	namer := Prefix(t)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp(parent, "uvtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil { // tasks run as other users
		t.Fatal(err)
	}
	a := &Agent{t: t, Bin: Binary(t), Prefix: namer.Prefix,
		DataDir: filepath.Join(root, "data"), Socket: filepath.Join(root, "uv.sock"),
		Config: filepath.Join(root, "agent.hcl")}
	if !metricsBlock.MatchString(extra) {
		// Agents of parallel tests must not fight over the default port.
		extra += "\nmetrics {\n  address = \"127.0.0.1:0\"\n}\n"
	}
	cfg := fmt.Sprintf("data_dir = %q\nsocket = %q\nunit_prefix = %q\nlog_level = \"debug\"\n%s\n", a.DataDir, a.Socket, a.Prefix, extra)
	if err := os.WriteFile(a.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() {
		a.Kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log.String())
		}
	})
	return a
}

var metricsBlock = regexp.MustCompile(`(?m)^\s*metrics\s*\{`)

// Info returns the agent's GET /v1/agent answer.
func (a *Agent) Info() map[string]any {
	a.t.Helper()
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.Socket)
		},
	}}
	resp, err := c.Get("http://agent/v1/agent")
	if err != nil {
		a.t.Fatalf("GET /v1/agent: %v", err)
	}
	defer resp.Body.Close()
	var info map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		a.t.Fatalf("GET /v1/agent: %v", err)
	}
	return info
}

// MetricsURL is the URL of the agent's /metrics (its port changes when
// the agent restarts unless the config fixes it).
func (a *Agent) MetricsURL() string {
	a.t.Helper()
	addr, _ := a.Info()["metrics_address"].(string)
	if addr == "" {
		a.t.Fatal("the agent reports no metrics_address")
	}
	return "http://" + addr + "/metrics"
}

// Start (re)starts the agent process and waits until its API answers.
func (a *Agent) Start() {
	a.t.Helper()
	a.log = &bytes.Buffer{}
	a.cmd = exec.Command(a.Bin, "agent", "-config", a.Config)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	Eventually(a.t, 15*time.Second, "agent socket", func() bool {
		c, err := net.Dial("unix", a.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Kill sends SIGKILL to the agent (tasks must survive it).
func (a *Agent) Kill() {
	if a.cmd != nil && a.cmd.Process != nil {
		a.cmd.Process.Kill()
		a.cmd.Wait()
		a.cmd = nil
	}
}

// PID is the agent's process id.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Log returns what the agent logged so far.
func (a *Agent) Log() string { return a.log.String() }

// Unit returns the unit name of a task instance of this agent.
func (a *Agent) Unit(job, task string, index int) string {
	return fmt.Sprintf("%s-%s-%s@%d.service", a.Prefix, job, task, index)
}

// CLI runs the unitvisor client against this agent and returns its
// combined output and exit code.
func (a *Agent) CLI(args ...string) (string, int) {
	a.t.Helper()
	cmd := exec.Command(a.Bin, args...)
	cmd.Env = append(os.Environ(), "UNITVISOR_SOCKET="+a.Socket)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatalf("run %v: %v", args, err)
	}
	return string(out), code
}

// MustCLI runs the client and fails the test on a non-zero exit.
func (a *Agent) MustCLI(args ...string) string {
	a.t.Helper()
	out, code := a.CLI(args...)
	if code != 0 {
		a.t.Fatalf("unitvisor %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// WriteJob writes a job file into a temp dir and returns its path.
func WriteJob(t testing.TB, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Status returns `job status -json JOB` as the agent answers it.
func (a *Agent) Status(job string) supervisor.JobStatus {
	a.t.Helper()
	out := a.MustCLI("job", "status", "-json", job)
	var js []supervisor.JobStatus
	if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 1 {
		a.t.Fatalf("job status -json: %v\n%s", err, out)
	}
	return js[0]
}

// Instance returns one task instance's status.
func (a *Agent) Instance(job, task string, index int) supervisor.InstanceStatus {
	a.t.Helper()
	for _, in := range a.Status(job).Instances {
		if in.Task == task && in.Index == index {
			return in
		}
	}
	a.t.Fatalf("no instance %s[%d] in job %s", task, index, job)
	return supervisor.InstanceStatus{}
}
