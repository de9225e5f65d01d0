//go:build integration

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// The agent under systemd as Type=notify becomes active only through its
// READY=1, which it sends after the first reconcile.
func TestAgentNotifiesReadyAndRefusesASecondAgent(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	// A second agent on the same socket must refuse to start.
	out, err := exec.Command(a.Bin, "agent", "-config", a.Config).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another agent") {
		t.Fatalf("second agent: err %v\n%s", err, out)
	}
	a.Kill()

	unit := a.Prefix + "-agent.service"
	run := exec.Command("systemd-run", "--unit", unit, "--property", "Type=notify", "--quiet",
		"--property", "TimeoutStartSec=20s", a.Bin, "agent", "-config", a.Config)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("systemd-run agent: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("systemctl", "stop", unit).Run() })
	sdtest.Eventually(t, 20*time.Second, "agent unit active (READY=1 received)", func() bool {
		return sdtest.Show(t, unit, "ActiveState") == "active"
	})
	if st := sdtest.Show(t, unit, "StatusErrno"); st != "0" {
		t.Fatalf("StatusErrno %s", st)
	}
}

func TestLogsShowsTaskOutput(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "logs" + a.Prefix
	file := sdtest.WriteJob(t, "logs.hcl", fmt.Sprintf(`
job %q {
  task "talk" {
    driver = "exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "echo said-by-${UNITVISOR_TASK}; exec sleep 600"]
    }
  }
}`, job))
	a.MustCLI("job", "run", file)
	sdtest.Eventually(t, 10*time.Second, "logs output", func() bool {
		out, code := a.CLI("logs", job, "talk")
		return code == 0 && strings.Contains(out, "said-by-talk")
	})
	out, code := a.CLI("logs", job, "nosuchtask")
	if code != 0 || strings.Contains(out, "said-by") {
		t.Fatalf("logs of another task: exit %d\n%s", code, out)
	}
}
