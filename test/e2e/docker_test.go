//go:build integration

package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/drivers/docker"
	"github.com/unitvisor/unitvisor/internal/imagetest"
	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// overlayParent is where agents whose docker tasks must get overlay
// rootfs live: in the sandbox /var is an overlayfs, which overlayfs does
// not accept as an upper layer, while / (and so /srv) is a tmpfs; on a
// normal host both work.
const overlayParent = "/srv/unitvisor-test"

// dockerAgent starts an agent with the docker driver, volumes allowed
// under allowed.
func dockerAgent(t *testing.T, parent, allowed string) *sdtest.Agent {
	t.Helper()
	return sdtest.StartAgentUnder(t, parent, fmt.Sprintf("driver \"docker\" {\n  enabled = true\n  allowed_paths = [%q]\n}\n", allowed))
}

// cgroupProcs lists the pids in a unit's memory cgroup (v1) or its
// unified cgroup (v2).
func cgroupProcs(t *testing.T, unit string) []int {
	t.Helper()
	cg := sdtest.Show(t, unit, "ControlGroup")
	var b []byte
	var err error
	for _, p := range []string{"/sys/fs/cgroup/memory" + cg, "/sys/fs/cgroup" + cg, "/sys/fs/cgroup/unified" + cg} {
		if b, err = os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("cgroup.procs of %s: %v", unit, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// du returns the disk use of dirs in KiB (du -skcx: hard links once, and
// not inside other filesystems such as a task's overlay rootfs mount).
func du(t *testing.T, dirs ...string) int {
	t.Helper()
	out, err := exec.Command("du", append([]string{"-skcx"}, dirs...)...).Output()
	if err != nil {
		t.Fatalf("du %v: %v", dirs, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n, _ := strconv.Atoi(strings.Fields(lines[len(lines)-1])[0])
	return n
}

// TestDockerDriver pulls a busybox image from a local registry and runs two
// instances of it: output in the journal, env, args, user, a volume and
// ports as declared, the container in the unit's cgroup under MemoryMax,
// one unpacked rootfs shared by both (overlays), stop within kill_timeout
// although PID 1 (sleep) ignores SIGTERM, runtime state cleaned after.
func TestDockerDriver(t *testing.T) {
	reg := imagetest.StartRegistry(t, false)
	ref := reg.Push(t, imagetest.BusyboxImage(t), "team/busybox:1")
	vol := sharedDir(t, "uvdockvol")
	if err := os.WriteFile(filepath.Join(vol, "hello.txt"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := dockerAgent(t, overlayParent, vol)
	node := a.MustCLI("node", "status")
	if !regexp.MustCompile(`driver docker\s+enabled \{.*"runtime":"[^"]*crun".*"version":"[0-9.]+"`).MatchString(node) {
		t.Fatalf("node status does not show crun:\n%s", node)
	}
	if !strings.Contains(node, `"overlay":true`) {
		t.Fatalf("overlay rootfs not usable under %s:\n%s", overlayParent, node)
	}
	job := "dk" + a.Prefix
	file := sdtest.WriteJob(t, "docker.hcl", fmt.Sprintf(`
job %q {
  task "web" {
    driver = "docker"
    count  = 2
    port "http" {}
    config {
      image   = %q
      args    = ["sh", "-c", "echo greeting=$GREETING image_var=$IMAGE_VAR override=$OVERRIDE port=$UNITVISOR_PORT_http index=${UNITVISOR_INDEX} literal=$HOME; id; pwd; cat /data/hello.txt; echo ro-test > /data/x 2>/dev/null || echo volume-read-only; echo local > /local/mine; echo scratch > /tmp/scratch; exec sleep 1000"]
      volumes = ["%s:/data:ro"]
    }
    env {
      GREETING = "hi-${UNITVISOR_TASK}"
      OVERRIDE = "task"
    }
    resources {
      memory = 64
    }
    kill_timeout = "3s"
  }
}`, job, ref, vol))
	out := a.MustCLI("job", "run", "-timeout", "90s", file)
	t.Logf("job run:\n%s", out)
	if !strings.Contains(a.Log(), "waiting for the driver to fetch") {
		t.Fatalf("the agent did not wait for the pull:\n%s", a.Log())
	}
	units := []string{a.Unit(job, "web", 0), a.Unit(job, "web", 1)}
	var logs string
	sdtest.Eventually(t, 20*time.Second, "both containers' output in the journal", func() bool {
		logs = journal(t, "UNITVISOR_JOB="+job)
		return strings.Count(logs, "volume-read-only") == 2
	})
	t.Logf("journal:\n%s", logs)
	port0 := a.Instance(job, "web", 0).Ports["http"]
	for _, want := range []string{
		fmt.Sprintf("greeting=hi-web image_var=from-image override=task port=%d index=0 literal=/home/app", port0),
		"uid=1000(app) gid=1000(app)",
		"/home/app",
		"from-the-host",
	} {
		if !strings.Contains(logs, want) {
			t.Fatalf("journal lacks %q:\n%s", want, logs)
		}
	}
	if ses := sdtest.Show(t, units[0], "SuccessExitStatus"); ses != "143" {
		t.Fatalf("SuccessExitStatus %q, want 143 (128+SIGTERM)", ses)
	}
	// The container is in the unit's cgroup, under the unit's MemoryMax.
	if mm := sdtest.Show(t, units[0], "MemoryMax"); mm != strconv.Itoa(64<<20) {
		t.Fatalf("MemoryMax %s, want 64 MiB", mm)
	}
	var sleeper int
	for _, pid := range cgroupProcs(t, units[0]) {
		if comm(pid) == "sleep" {
			sleeper = pid
		}
	}
	if sleeper == 0 {
		t.Fatalf("no sleep process in the cgroup of %s", units[0])
	}
	if uid := procUID(t, sleeper); uid != "1000" {
		t.Fatalf("container process runs as uid %s, want 1000 (app)", uid)
	}
	// Both tasks run on one unpacked rootfs: overlays with upper layers in
	// their task directories.
	store := filepath.Join(a.DataDir, "oci")
	roots, _ := os.ReadDir(filepath.Join(store, "rootfs"))
	if len(roots) != 1 {
		t.Fatalf("want one unpacked rootfs, got %d", len(roots))
	}
	lower := filepath.Join(store, "rootfs", roots[0].Name())
	if lowers := docker.MountedLowers(); !lowers[lower] {
		t.Fatalf("rootfs %s is not an overlay's lower layer: %v", lower, lowers)
	}
	tasks := []string{filepath.Join(a.DataDir, "tasks", job, "web", "0"), filepath.Join(a.DataDir, "tasks", job, "web", "1")}
	storeKiB, rootKiB := du(t, store), du(t, lower)
	uppers := du(t, filepath.Join(tasks[0], "rootfs-upper"), filepath.Join(tasks[1], "rootfs-upper"))
	taskKiB := du(t, tasks[0], tasks[1])
	t.Logf("disk use: image store %d KiB (unpacked rootfs %d KiB), two task dirs %d KiB (their overlay upper layers %d KiB)",
		storeKiB, rootKiB, taskKiB, uppers)
	if uppers > rootKiB/4 {
		t.Fatalf("upper layers %d KiB: the rootfs (%d KiB) seems copied per task", uppers, rootKiB)
	}
	// Writes to the rootfs land in the task's upper layer, not the image.
	if _, err := os.Stat(filepath.Join(tasks[0], "rootfs-upper", "tmp", "scratch")); err != nil {
		t.Fatalf("the container's write is not in its upper layer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(lower, "tmp", "scratch")); err == nil {
		t.Fatal("the container wrote into the shared image rootfs")
	}
	if b, err := os.ReadFile(filepath.Join(tasks[1], "local", "mine")); err != nil || string(b) != "local\n" {
		t.Fatalf("/local of the container is not the task's local/: %q %v", b, err)
	}
	crunRoot := filepath.Join("/run/unitvisor/crun", a.Prefix)
	if out, err := exec.Command("crun", "--root", crunRoot, "list", "-q").Output(); err != nil || len(strings.Fields(string(out))) != 2 {
		t.Fatalf("crun list: %v %q, want the two containers", err, out)
	}

	// The unit's commands survive a daemon-reload (systemd 252 loses the
	// Ex forms of ExecStart/ExecStopPost when it reads transient units back).
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	for _, p := range []string{"ExecStart", "ExecStartPre", "ExecStopPost"} {
		if v := sdtest.Show(t, units[0], p); !strings.Contains(v, "docker-") {
			t.Fatalf("after daemon-reload %s of %s is %q", p, units[0], v)
		}
	}

	// sleep as PID 1 ignores SIGTERM: the stop ends with SIGKILL after
	// kill_timeout (3s).
	start := time.Now()
	a.MustCLI("job", "stop", job)
	took := time.Since(start)
	t.Logf("stop took %s", took)
	// At least kill_timeout (SIGTERM was ignored), and far from systemd's
	// default 90s (the SIGKILL came from kill_timeout).
	if took < 2*time.Second || took > 15*time.Second {
		t.Fatalf("stop took %s, want about kill_timeout (3s)", took)
	}
	if out, err := exec.Command("crun", "--root", crunRoot, "list", "-q").Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("crun state left after stop: %v %q", err, out)
	}
	if lowers := docker.MountedLowers(); lowers[lower] {
		t.Fatal("overlay rootfs still mounted after stop")
	}
}

// TestDockerLoadInitOOM runs the image from a docker save tarball (no
// registry), with init as PID 1 so SIGTERM stops it at once, as root on a
// read-only rootfs (a copy where overlays are unusable), cleans up after
// a crash of crun, and a memory limit kills an allocation beyond it.
func TestDockerLoadInitOOM(t *testing.T) {
	dir := sharedDir(t, "uvdockload")
	tarPath := filepath.Join(dir, "busybox.tar")
	imagetest.WriteTarball(t, imagetest.BusyboxImage(t), tarPath, "busybox:saved")
	a := dockerAgent(t, "/var/lib", dir)
	job := "dl" + a.Prefix
	file := sdtest.WriteJob(t, "load.hcl", fmt.Sprintf(`
job %q {
  task "init" {
    driver = "docker"
    config {
      load       = %q
      entrypoint = ["sh", "-c"]
      args       = ["echo loaded pid=$$; echo user=$(id -u); touch /x 2>/dev/null || echo rootfs-read-only; exec sleep 1000"]
      init       = true
      readonly_rootfs = true
    }
    user         = "root"
    kill_timeout = "20s"
  }
  task "crash" {
    driver = "docker"
    config {
      load         = %q
      network_mode = "none"
    }
    restart {
      attempts = 0
    }
  }
  task "hog" {
    driver = "docker"
    config {
      load = %q
      args = ["awk", "BEGIN { s = \"x\"; while (1) s = s s }"]
    }
    resources {
      memory = 32
    }
    restart {
      attempts = 0
    }
  }
}`, job, tarPath, tarPath, tarPath))
	out, _ := a.CLI("job", "run", "-timeout", "90s", file)
	t.Logf("job run:\n%s", out)
	unit := a.Unit(job, "init", 0)
	waitActive(t, unit)
	var logs string
	sdtest.Eventually(t, 20*time.Second, "output in the journal", func() bool {
		logs = journal(t, "UNITVISOR_JOB="+job, "UNITVISOR_TASK=init")
		return strings.Contains(logs, "rootfs-read-only")
	})
	// Under init, the shell is not PID 1.
	if !strings.Contains(logs, "loaded pid=") || strings.Contains(logs, "loaded pid=1\n") {
		t.Fatalf("want the command under an init (pid > 1):\n%s", logs)
	}
	taskDir := filepath.Join(a.DataDir, "tasks", job, "init", "0")
	overlay := strings.Contains(a.MustCLI("node", "status"), `"overlay":true`)
	if _, err := os.Stat(filepath.Join(taskDir, "rootfs.copied")); (err == nil) == overlay {
		t.Fatalf("overlay %v but rootfs copy marker: %v", overlay, err)
	}
	t.Logf("overlay usable under /var/lib: %v; task dir %d KiB", overlay, du(t, taskDir))
	sdtest.Eventually(t, 30*time.Second, "the hog killed at its memory limit", func() bool {
		return a.Instance(job, "hog", 0).Status == "failed"
	})
	if in := a.Instance(job, "hog", 0); !strings.Contains(in.Detail, "out of memory") {
		t.Fatalf("hog: %s (%s), want failed, out of memory", in.Status, in.Detail)
	}
	// A crash (crun killed outright): ExecStopPost deletes the runtime
	// state; the other container of the job is still listed.
	crunRoot := filepath.Join("/run/unitvisor/crun", a.Prefix)
	crashUnit := a.Unit(job, "crash", 0)
	waitActive(t, crashUnit)
	if out, err := exec.Command("crun", "--root", crunRoot, "list", "-q").Output(); err != nil || !strings.Contains(string(out), docker.ContainerID(crashUnit)) {
		t.Fatalf("crun list: %v %q, want the crash task's container", err, out)
	}
	if out, err := exec.Command("systemctl", "kill", "--kill-who=main", "--signal=KILL", crashUnit).CombinedOutput(); err != nil {
		t.Fatalf("kill crun: %v %s", err, out)
	}
	sdtest.Eventually(t, 20*time.Second, "the crashed task failed", func() bool {
		return a.Instance(job, "crash", 0).Status == "failed"
	})
	list, err := exec.Command("crun", "--root", crunRoot, "list", "-q").Output()
	if err != nil || strings.Contains(string(list), docker.ContainerID(crashUnit)) || !strings.Contains(string(list), docker.ContainerID(unit)) {
		t.Fatalf("crun list after the crash: %v %q: want the init task's container only", err, list)
	}
	// With an init, SIGTERM ends the container at once, well within the
	// kill_timeout of 20s.
	start := time.Now()
	a.MustCLI("job", "stop", job)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("stop took %s: init did not pass SIGTERM on", took)
	}
}

// TestDockerPullErrors: a wrong image name, an unreachable registry and
// bad (or no) credentials make `job run` fail with a clear error, while
// the running tasks of another job are not touched. Right credentials,
// given in the job or in a docker config.json, work.
func TestDockerPullErrors(t *testing.T) {
	reg := imagetest.StartRegistry(t, true)
	img := imagetest.BusyboxImage(t)
	ref := reg.Push(t, img, "private/busybox:1")
	ref2 := reg.Push(t, img, "private/busybox:2")
	// Tags nobody pulls with the right credentials: a stored image is
	// served from the store without asking the registry again.
	refBad := reg.Push(t, img, "private/busybox:bad")
	refNone := reg.Push(t, img, "private/busybox:none")
	authDir := sharedDir(t, "uvdockauth")
	authFile := filepath.Join(authDir, "config.json")
	cred := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
	if err := os.WriteFile(authFile, fmt.Appendf(nil, `{"auths": {"http://%s": {"auth": %q}}}`, reg.Addr, cred), 0o600); err != nil {
		t.Fatal(err)
	}
	a := dockerAgent(t, overlayParent, "/nonexistent")
	good := "good" + a.Prefix
	a.MustCLI("job", "run", "-timeout", "60s", sdtest.WriteJob(t, "good.hcl", fmt.Sprintf(`
job %q {
  task "t" {
    driver = "docker"
    config {
      image = %q
      auth  = { username = "user", password = "secret" }
    }
    kill_timeout = "1s"
  }
  task "cfg" {
    driver = "docker"
    config {
      image = %q
      auth  = { config = %q }
    }
    kill_timeout = "1s"
  }
}`, good, ref, ref2, authFile)))
	sdtest.Eventually(t, 20*time.Second, "output of both tasks of the private image", func() bool {
		return strings.Count(journal(t, "UNITVISOR_JOB="+good), imagetest.Greet) == 2
	})
	goodUnits := []string{a.Unit(good, "t", 0), a.Unit(good, "cfg", 0)}
	pids := []int{mainPID(t, goodUnits[0]), mainPID(t, goodUnits[1])}

	closed := imagetest.FreePort(t)
	for _, tc := range []struct {
		name, image, auth, want string
	}{
		{"wrong-name", reg.Addr + "/private/nosuch:1", `auth = { username = "user", password = "secret" }`, "no such image or tag"},
		{"unreachable", fmt.Sprintf("127.0.0.1:%d/busybox:1", closed), "", "unreachable"},
		{"bad-credentials", refBad, `auth = { username = "user", password = "wrong" }`, "refused the credentials"},
		{"no-credentials", refNone, "", "refused the credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := strings.ReplaceAll(tc.name, "-", "") + a.Prefix
			file := sdtest.WriteJob(t, "bad.hcl", fmt.Sprintf(`
job %q {
  task "t" {
    driver = "docker"
    config {
      image = %q
      %s
    }
  }
}`, job, tc.image, tc.auth))
			out, code := a.CLI("job", "run", "-timeout", "60s", file)
			t.Logf("job run (exit %d):\n%s", code, out)
			if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "error") {
				t.Fatalf("exit %d, want 1 with %q:\n%s", code, tc.want, out)
			}
			a.MustCLI("job", "stop", "-purge", job)
		})
	}
	for i, u := range goodUnits {
		if pid := mainPID(t, u); pid != pids[i] || sdtest.Show(t, u, "ActiveState") != "active" {
			t.Fatalf("the other job's task %s was touched: pid %d -> %d", u, pids[i], pid)
		}
	}
	// Killed with the task directory already gone (as the test harness
	// does): ExecStopPost still deletes the runtime state.
	if err := os.RemoveAll(filepath.Join(a.DataDir, "tasks", good)); err != nil {
		t.Fatal(err)
	}
	for _, u := range goodUnits {
		sdtest.Kill(t, u)
	}
	crunRoot := filepath.Join("/run/unitvisor/crun", a.Prefix)
	sdtest.Eventually(t, 20*time.Second, "no container state left", func() bool {
		out, err := exec.Command("crun", "--root", crunRoot, "list", "-q").Output()
		return err == nil && strings.TrimSpace(string(out)) == ""
	})
}
