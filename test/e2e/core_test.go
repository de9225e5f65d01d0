//go:build integration

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

func TestTwoInstanceExecJob(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "web" + a.Prefix
	file := sdtest.WriteJob(t, "web.hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    count  = 2
    config {
      command = "/bin/sh"
      args    = ["-c", "echo \"out task=$1 literal=$2 $3 greeting=$GREETING\"; exec sleep 600", "sh", "${UNITVISOR_TASK}-${UNITVISOR_INDEX}", "$HOME", "${PATH}"]
    }
    env { GREETING = "hello from ${UNITVISOR_TASK}" }
    port "http" {}
  }
}`, job))
	out := a.MustCLI("job", "run", file)
	if !strings.Contains(out, "all 2 instances running") {
		t.Fatalf("job run output:\n%s", out)
	}
	for i := 0; i < 2; i++ {
		u := a.Unit(job, "api", i)
		want := map[string]string{
			"ActiveState": "active", "SubState": "running", "Slice": "unitvisor.slice", "User": "nobody",
			"Type": "exec", "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectSystem": "strict",
			"ProtectHome": "yes", "Restart": "on-failure", "WorkingDirectory": filepath.Join(a.DataDir, "tasks", job, "api", fmt.Sprint(i)),
		}
		for prop, v := range want {
			if got := sdtest.Show(t, u, prop); got != v {
				t.Errorf("%s %s = %q, want %q", u, prop, got, v)
			}
		}
		if uid := procUID(t, mainPID(t, u)); uid != "65534" {
			t.Errorf("%s runs as uid %s, want nobody (65534)", u, uid)
		}
		in := a.Instance(job, "api", i)
		if in.Ports["http"] == 0 || in.Status != "running" {
			t.Errorf("instance %d: %+v", i, in)
		}
	}
	var logs string
	sdtest.Eventually(t, 10*time.Second, "journal lines of both instances", func() bool {
		logs = journal(t, "UNITVISOR_JOB="+job)
		return strings.Contains(logs, "task=api-0") && strings.Contains(logs, "task=api-1")
	})
	if !strings.Contains(logs, "literal=$HOME ${PATH} greeting=hello from api") {
		t.Fatalf("arguments were expanded or env not interpolated:\n%s", logs)
	}
	// secrets/ is private to the task's user.
	fi, err := os.Stat(filepath.Join(a.DataDir, "tasks", job, "api", "0", "secrets"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("secrets dir: %v %v", fi, err)
	}
}

func TestRestartPolicyFail(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "crash" + a.Prefix
	file := sdtest.WriteJob(t, "crash.hcl", fmt.Sprintf(`
job %q {
  task "c" {
    driver = "exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "echo run; sleep 0.3; exit 3"]
    }
    restart {
      attempts = 2
      interval = "1m"
      delay    = "200ms"
      mode     = "fail"
    }
  }
}`, job))
	out, code := a.CLI("job", "run", file)
	if code != 1 {
		t.Fatalf("job run of a failing job: exit %d, want 1\n%s", code, out)
	}
	u := a.Unit(job, "c", 0)
	if st := sdtest.Show(t, u, "ActiveState"); st != "failed" {
		t.Fatalf("%s is %s, want failed", u, st)
	}
	in := a.Instance(job, "c", 0)
	if in.Status != "failed" || !strings.Contains(in.Detail, "exit code 3") {
		t.Fatalf("status %q detail %q, want failed with exit code 3", in.Status, in.Detail)
	}
	sdtest.Eventually(t, 5*time.Second, "3 runs (1 + 2 attempts) in the journal", func() bool {
		return strings.Count(journal(t, "UNITVISOR_JOB="+job), "run\n") == 3
	})
	time.Sleep(time.Second)
	if n := strings.Count(journal(t, "UNITVISOR_JOB="+job), "run\n"); n != 3 {
		t.Fatalf("ran %d times, want 3 (1 + 2 attempts)", n)
	}
}

func TestRestartPolicyDelay(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "delay" + a.Prefix
	file := sdtest.WriteJob(t, "delay.hcl", fmt.Sprintf(`
job %q {
  task "d" {
    driver = "exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "echo run; sleep 0.2; exit 4"]
    }
    restart {
      attempts = 1
      interval = "3s"
      delay    = "100ms"
      mode     = "delay"
    }
  }
}`, job))
	a.CLI("job", "run", "-detach", file)
	u := a.Unit(job, "d", 0)
	sdtest.Eventually(t, 15*time.Second, "first failure", func() bool { return sdtest.Show(t, u, "ActiveState") == "failed" })
	failedAt := time.Now()
	if in := a.Instance(job, "d", 0); in.RetryAt.IsZero() {
		t.Fatalf("delay mode: no retry scheduled: %+v", in)
	}
	runs := func() int { return strings.Count(journal(t, "UNITVISOR_JOB="+job), "run\n") }
	sdtest.Eventually(t, 2*time.Second, "2 runs (1 + 1 attempt) in the journal", func() bool { return runs() == 2 })
	sdtest.Eventually(t, 20*time.Second, "started again after the interval", func() bool { return runs() > 2 })
	if waited := time.Since(failedAt); waited < 2*time.Second {
		t.Fatalf("started again after %s, want about the 3s interval", waited)
	}
}

func TestAgentKillAdoptsReapsRecreates(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "adopt" + a.Prefix
	file := sdtest.WriteJob(t, "adopt.hcl", fmt.Sprintf(`
job %q {
  task "keep" {
    driver = "exec"
    count  = 2
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
  }
  task "vanish" {
    driver = "raw_exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
  }
}`, job))
	// raw_exec is off by default: the agent refuses it with a hint.
	out, code := a.CLI("job", "run", file)
	if code != 2 || !strings.Contains(out, `driver "raw_exec" is not enabled`) {
		t.Fatalf("raw_exec disabled: exit %d\n%s", code, out)
	}
	a.Kill()
	os.WriteFile(a.Config, append(must(os.ReadFile(a.Config)), "driver \"raw_exec\" { enabled = true }\n"...), 0o644)
	a.Start()
	a.MustCLI("job", "run", file)
	keep := []string{a.Unit(job, "keep", 0), a.Unit(job, "keep", 1)}
	vanish := a.Unit(job, "vanish", 0)
	type ident struct{ pid, inv string }
	before := map[string]ident{}
	for _, u := range keep {
		before[u] = ident{sdtest.Show(t, u, "MainPID"), sdtest.Show(t, u, "InvocationID")}
	}

	a.Kill() // SIGKILL: no goodbye
	stray := a.Prefix + "-nobody-stray@0.service"
	if out, err := exec.Command("systemd-run", "--unit", stray, "/bin/sleep", "600").CombinedOutput(); err != nil {
		t.Fatalf("systemd-run stray: %v %s", err, out)
	}
	if out, err := exec.Command("systemctl", "stop", vanish).CombinedOutput(); err != nil {
		t.Fatalf("stop %s: %v %s", vanish, err, out)
	}
	a.Start()

	waitActive(t, vanish)
	sdtest.Eventually(t, 15*time.Second, "stray unit stopped", func() bool {
		st := sdtest.Show(t, stray, "ActiveState")
		return st == "inactive" || st == "failed"
	})
	for _, u := range keep {
		now := ident{sdtest.Show(t, u, "MainPID"), sdtest.Show(t, u, "InvocationID")}
		if now != before[u] {
			t.Errorf("%s was touched by the agent restart: before %v, after %v", u, before[u], now)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestStopWithinKillTimeoutWhenSIGTERMIgnored(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "stubborn" + a.Prefix
	file := sdtest.WriteJob(t, "stubborn.hcl", fmt.Sprintf(`
job %q {
  task "s" {
    driver = "exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"]
    }
    kill_timeout = "2s"
  }
}`, job))
	a.MustCLI("job", "run", file)
	u := a.Unit(job, "s", 0)
	start := time.Now()
	a.MustCLI("job", "stop", job)
	took := time.Since(start)
	if took < 1500*time.Millisecond || took > 5*time.Second {
		t.Fatalf("job stop took %s; want about kill_timeout (2s), and SIGKILL soon after", took)
	}
	if st := sdtest.Show(t, u, "ActiveState"); st != "inactive" {
		t.Fatalf("after stop %s is %s", u, st)
	}
	in := a.Instance(job, "s", 0)
	if in.Status != "dead" {
		t.Fatalf("stopped job's instance: %+v", in)
	}
}

func TestInvalidJobFileDisturbsNothing(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "good" + a.Prefix
	good := sdtest.WriteJob(t, "good.hcl", fmt.Sprintf(`
job %q {
  task "t" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
  }
}`, job))
	a.MustCLI("job", "run", good)
	u := a.Unit(job, "t", 0)
	pid := sdtest.Show(t, u, "MainPID")

	bad := sdtest.WriteJob(t, "bad.hcl", fmt.Sprintf(`
job %q {
  task "t" {
    driver = "exec"
    config { comand = "/bin/sleep" }
    kill_timeout = "soon"
  }
  task "u" {
    driver = "exec"
    kill_signal = "SIGBOGUS"
    config { command = "sleep" }
  }
}`, job))
	for _, args := range [][]string{{"validate", bad}, {"job", "run", bad}} {
		out, code := a.CLI(args...)
		if code != 2 {
			t.Fatalf("%v: exit %d, want 2\n%s", args, code, out)
		}
		lines := regexp.MustCompile(`(?m)bad\.hcl:\d+:\d+: `).FindAllString(out, -1)
		if len(lines) < 4 {
			t.Fatalf("%v: want every problem (>= 4) with file:line:col, got %d:\n%s", args, len(lines), out)
		}
	}
	if now := sdtest.Show(t, u, "MainPID"); now != pid || sdtest.Show(t, u, "ActiveState") != "active" {
		t.Fatalf("running task disturbed: pid %s -> %s", pid, now)
	}
}

func TestJobUpdateReplacesOnlyChangedTask(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "upd" + a.Prefix
	src := func(bArg string, bCount int) string {
		return fmt.Sprintf(`
job %q {
  task "a" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["600"]
    }
  }
  task "b" {
    driver = "exec"
    count  = %d
    config {
      command = "/bin/sleep"
      args    = [%q]
    }
  }
}`, job, bCount, bArg)
	}
	a.MustCLI("job", "run", sdtest.WriteJob(t, "v1.hcl", src("600", 2)))
	ua, ub0, ub1 := a.Unit(job, "a", 0), a.Unit(job, "b", 0), a.Unit(job, "b", 1)
	invA, invB := sdtest.Show(t, ua, "InvocationID"), sdtest.Show(t, ub0, "InvocationID")

	out := a.MustCLI("job", "run", sdtest.WriteJob(t, "v2.hcl", src("601", 2)))
	if !strings.Contains(out, "task a: unchanged") || !strings.Contains(out, "task b: replaced") {
		t.Fatalf("update summary:\n%s", out)
	}
	if got := sdtest.Show(t, ua, "InvocationID"); got != invA {
		t.Fatalf("unchanged task a was restarted")
	}
	if got := sdtest.Show(t, ub0, "InvocationID"); got == invB {
		t.Fatalf("changed task b was not replaced")
	}
	if !strings.Contains(sdtest.Show(t, ub0, "ExecStart"), "601") {
		t.Fatalf("task b runs the old args: %s", sdtest.Show(t, ub0, "ExecStart"))
	}
	// Lower the count: the extra instance is stopped, the rest untouched.
	invB = sdtest.Show(t, ub0, "InvocationID")
	a.MustCLI("job", "run", sdtest.WriteJob(t, "v3.hcl", src("601", 1)))
	sdtest.Eventually(t, 15*time.Second, "extra instance stopped", func() bool {
		return sdtest.Show(t, ub1, "ActiveState") == "inactive"
	})
	if got := sdtest.Show(t, ub0, "InvocationID"); got != invB {
		t.Fatalf("instance 0 was restarted when the count was lowered")
	}
}

// A task whose arguments hold "$" and ";" keeps its exact command line
// across a daemon-reload (package installs do one): the restarts after the
// reload run it unchanged. (systemd 252 garbles such command lines in the
// transient unit file; the agent routes them through `unitvisor exec-task`.)
func TestCommandSurvivesDaemonReload(t *testing.T) {
	a := sdtest.StartAgent(t, "")
	job := "reload" + a.Prefix
	file := sdtest.WriteJob(t, "reload.hcl", fmt.Sprintf(`
job %q {
  task "r" {
    driver = "exec"
    config {
      command = "/bin/sh"
      args    = ["-c", "echo \"run|$1|$2\"; sleep 1; exit 3", "sh", "$HOME", "${PATH}"]
    }
    restart {
      attempts = 2
      interval = "1m"
      delay    = "200ms"
    }
  }
}`, job))
	a.CLI("job", "run", "-detach", file)
	u := a.Unit(job, "r", 0)
	sdtest.Eventually(t, 10*time.Second, "first run", func() bool {
		return strings.Contains(journal(t, "UNITVISOR_JOB="+job), "run|$HOME|${PATH}")
	})
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	sdtest.Eventually(t, 20*time.Second, "failed after its attempts", func() bool { return sdtest.Show(t, u, "ActiveState") == "failed" })
	// (A reload may reset systemd's start-limit count: one more run is fine.)
	logs := journal(t, "UNITVISOR_JOB="+job)
	if intact, all := strings.Count(logs, "run|$HOME|${PATH}\n"), strings.Count(logs, "run|"); intact < 3 || intact != all {
		t.Fatalf("%d intact runs of %d, want all and at least 3:\n%s", intact, all, journal(t, "_SYSTEMD_UNIT="+u))
	}
	if in := a.Instance(job, "r", 0); !strings.Contains(in.Detail, "exit code 3") {
		t.Fatalf("final exit %q, want exit code 3 (the command itself)", in.Detail)
	}
}
