//go:build integration

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// memory = 32 and the task allocates 100 MiB: the kernel kills it, status
// says out of memory, and the restart policy applies (1 restart, then failed).
func TestOutOfMemoryIsReported(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "oom" + a.Prefix
	file := sdtest.WriteJob(t, "oom.hcl", fmt.Sprintf(`
job %q {
  task "hog" {
    driver = "exec"
    config {
      command = "/usr/bin/python3"
      args    = ["-c", "print('allocating', flush=True); b = bytearray(100 * 1024 * 1024); print('survived', flush=True)"]
    }
    restart {
      attempts = 1
      interval = "1m"
      delay    = "200ms"
    }
    resources {
      memory = 32
    }
  }
}`, job))
	a.CLI("job", "run", "-detach", file)
	u := a.Unit(job, "hog", 0)
	sdtest.Eventually(t, 30*time.Second, "failed after the restart", func() bool { return sdtest.Show(t, u, "ActiveState") == "failed" })
	if got := sdtest.Show(t, u, "MemoryMax"); got != strconv.Itoa(32<<20) {
		t.Fatalf("MemoryMax = %s", got)
	}
	in := a.Instance(job, "hog", 0)
	if in.Status != "failed" || !strings.Contains(in.Detail, "out of memory") {
		t.Fatalf("status %q detail %q, want failed, out of memory", in.Status, in.Detail)
	}
	sdtest.Eventually(t, 5*time.Second, "two runs in the journal", func() bool {
		return strings.Count(journal(t, "UNITVISOR_JOB="+job), "allocating") == 2
	})
	if strings.Contains(journal(t, "UNITVISOR_JOB="+job), "survived") {
		t.Fatal("the allocation went through: memory limit not enforced")
	}
}

// A plain kill -9 is not an OOM kill.
func TestKill9IsNotOutOfMemory(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "k9" + a.Prefix
	file := sdtest.WriteJob(t, "k9.hcl", fmt.Sprintf(`
job %q {
  task "s" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
    restart {
      attempts = 0
    }
    resources {
      memory = 32
    }
  }
}`, job))
	a.MustCLI("job", "run", file)
	u := a.Unit(job, "s", 0)
	sdtest.Kill(t, u)
	sdtest.Eventually(t, 10*time.Second, "failed", func() bool { return sdtest.Show(t, u, "ActiveState") == "failed" })
	in := a.Instance(job, "s", 0)
	if in.Status != "failed" || strings.Contains(in.Detail, "out of memory") || !strings.Contains(in.Detail, "signal 9") {
		t.Fatalf("status %q detail %q, want failed by signal 9, not out of memory", in.Status, in.Detail)
	}
}

func TestResourcePropertiesAndUsage(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "res" + a.Prefix
	file := sdtest.WriteJob(t, "res.hcl", fmt.Sprintf(`
job %q {
  task "forky" {
    driver = "exec"
    config {
      command = "/usr/bin/python3"
      args    = ["-c", "import os, time\nn = 0\nfor i in range(60):\n  try:\n    if os.fork() == 0:\n      time.sleep(600)\n      os._exit(0)\n    n += 1\n  except OSError:\n    pass\nprint('forked', n, flush=True)\nwhile True:\n  pass\n"]
    }
    resources {
      cpu       = 200
      cpu_limit = "50%%"
      cpuset    = "0"
      memory    = 64
      pids      = 20
      io_weight = 300
    }
  }
}`, job))
	a.MustCLI("job", "run", file)
	u := a.Unit(job, "forky", 0)
	for prop, want := range map[string]string{
		"MemoryMax": strconv.Itoa(64 << 20), "CPUQuotaPerSecUSec": "500ms", "TasksMax": "20",
		"AllowedCPUs": "0", "CPUWeight": "200", "IOWeight": "300",
		"MemoryAccounting": "yes", "TasksAccounting": "yes", "CPUAccounting": "yes",
	} {
		if got := sdtest.Show(t, u, prop); got != want {
			t.Errorf("%s = %q, want %q", prop, got, want)
		}
	}
	// The fork loop hits the pids limit and stays under it.
	sdtest.Eventually(t, 10*time.Second, "fork loop at the limit", func() bool {
		n, _ := strconv.Atoi(sdtest.Show(t, u, "TasksCurrent"))
		return n >= 15
	})
	time.Sleep(time.Second)
	if n, _ := strconv.Atoi(sdtest.Show(t, u, "TasksCurrent")); n > 20 {
		t.Fatalf("TasksCurrent %d above TasksMax 20", n)
	}
	sdtest.Eventually(t, 5*time.Second, "fork count in the journal", func() bool {
		return strings.Contains(journal(t, "UNITVISOR_JOB="+job), "forked ")
	})
	if logs := journal(t, "UNITVISOR_JOB="+job); strings.Contains(logs, "forked 60") {
		t.Fatalf("all 60 forks succeeded despite pids = 20:\n%s", logs)
	}
	// Usage in job status matches systemd's view of the same cgroup.
	time.Sleep(time.Second) // let it burn some CPU
	in := a.Instance(job, "forky", 0)
	mem, _ := strconv.ParseUint(sdtest.Show(t, u, "MemoryCurrent"), 10, 64)
	if in.Usage == nil || in.Usage.MemoryBytes == 0 || mem == 0 {
		t.Fatalf("usage %+v, MemoryCurrent %d", in.Usage, mem)
	}
	if ratio := float64(in.Usage.MemoryBytes) / float64(mem); ratio < 0.8 || ratio > 1.25 {
		t.Fatalf("status memory %d vs systemctl MemoryCurrent %d", in.Usage.MemoryBytes, mem)
	}
	if in.Usage.MemoryLimitBytes != 64<<20 || in.Usage.Tasks < 15 || in.Usage.Tasks > 20 {
		t.Fatalf("usage %+v", in.Usage)
	}
	if in.Usage.CPUNanos < uint64(100*time.Millisecond) {
		t.Fatalf("a busy loop used only %dns of CPU", in.Usage.CPUNanos)
	}
	out := a.MustCLI("job", "status", job)
	if !regexp.MustCompile(`\d+\.\dMiB/64\.0MiB`).MatchString(out) {
		t.Fatalf("job status table lacks memory use:\n%s", out)
	}
}

func TestInvalidResourcesAreRefused(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "keep" + a.Prefix
	a.MustCLI("job", "run", sdtest.WriteJob(t, "keep.hcl", fmt.Sprintf(`
job %q {
  task "k" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
  }
}`, job)))
	u := a.Unit(job, "k", 0)
	pid := sdtest.Show(t, u, "MainPID")
	for name, res := range map[string]string{
		"negative": "memory = -1",
		"capacity": "memory = 16000000",
		"cpuset":   `cpuset = "0-4095"`,
		"device":   `devices = ["/dev/not-a-device"]`,
		"unknown":  "gpus = 1",
	} {
		file := sdtest.WriteJob(t, name+".hcl", fmt.Sprintf(`
job "bad%s" {
  task "b" {
    driver = "exec"
    config {
      command = "/bin/sleep"
    }
    resources {
      %s
    }
  }
}`, name, res))
		out, code := a.CLI("job", "run", file)
		if code != 2 || !regexp.MustCompile(name+`\.hcl:\d+:\d+: `).MatchString(out) {
			t.Errorf("%s: exit %d, want 2 with file:line:col\n%s", name, code, out)
		}
	}
	if now := sdtest.Show(t, u, "MainPID"); now != pid {
		t.Fatalf("running task disturbed: %s -> %s", pid, now)
	}
}
