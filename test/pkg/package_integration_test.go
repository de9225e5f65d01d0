//go:build integration

package pkg

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
	"github.com/unitvisor/unitvisor/supervisor"
)

// packages are the files one `make package` run wrote.
type packages struct{ deb, rpm string }

var (
	buildOnce sync.Once
	built     packages
	buildErr  error
)

// TestMain removes the packages the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range dists {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

var dists []string

// makePackage runs `make package` with its output in a directory of its
// own (never the checkout's dist/, which a developer may be using).
func makePackage() (packages, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return packages{}, err
	}
	dir, err := os.MkdirTemp("", "uvpkg")
	if err != nil {
		return packages{}, err
	}
	dists = append(dists, dir)
	// No --dirty: that refreshes the index of the (shared) checkout.
	describe, err := exec.Command("git", "-C", root, "describe", "--tags", "--always").Output()
	if err != nil {
		return packages{}, fmt.Errorf("git describe: %w", err)
	}
	cmd := exec.Command("make", "-s", "-C", root, "package", "DIST="+dir, "VERSION="+strings.TrimSpace(string(describe)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return packages{}, fmt.Errorf("make package: %w\n%s", err, out)
	}
	var p packages
	for _, f := range []struct {
		pattern string
		dst     *string
	}{{"unitvisor_*_amd64.deb", &p.deb}, {"unitvisor-*-1.x86_64.rpm", &p.rpm}} {
		m, _ := filepath.Glob(filepath.Join(dir, f.pattern))
		if len(m) != 1 {
			return p, fmt.Errorf("make package wrote %v for %s", m, f.pattern)
		}
		*f.dst = m[0]
	}
	return p, nil
}

func build(t *testing.T) packages {
	t.Helper()
	buildOnce.Do(func() {
		built, buildErr = makePackage()
		if buildErr == nil {
			for _, p := range []string{built.deb, built.rpm} {
				if fi, err := os.Stat(p); err == nil {
					t.Logf("built %s: %d bytes", filepath.Base(p), fi.Size())
				}
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lintian must report no error; overrides (with the reason) are in
// packaging/files/lintian-overrides.
func TestLintian(t *testing.T) {
	p := build(t)
	out, err := exec.Command("lintian", "--fail-on", "error", "--info", "--display-info", p.deb).CombinedOutput()
	var tags []string
	for _, l := range strings.Split(string(out), "\n") {
		if len(l) > 2 && l[1] == ':' && l[0] != 'N' {
			tags = append(tags, l)
		}
	}
	t.Logf("lintian: %d tags\n%s", len(tags), strings.Join(tags, "\n"))
	for _, l := range tags {
		if strings.HasPrefix(l, "E:") {
			t.Errorf("lintian error: %s", l)
		}
	}
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
}

var (
	debEntry = regexp.MustCompile(`^([-dlrwxsStT]{10}) \S+\s+\d+ \S+ \S+ \.(/\S*)$`)
	debOnly  = []string{"/usr/share/lintian/overrides/unitvisor"}
)

// The .rpm installs the same files with the same modes as the .deb (but
// for lintian's overrides), and the same configuration files.
func TestRPMMatchesDeb(t *testing.T) {
	p := build(t)
	debModes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", p.deb)), "\n") {
		m := debEntry.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("dpkg-deb -c: cannot read %q", l)
		}
		if m[1][0] == 'd' || slices.Contains(debOnly, m[2]) {
			continue
		}
		debModes[m[2]] = m[1]
	}
	rpmModes := map[string]string{}
	// --dump: path size mtime digest mode owner group isconfig isdoc rdev symlink
	for _, l := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", "--dump", p.rpm)), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("rpm --dump: cannot read %q", l)
		}
		mode, err := strconv.ParseUint(f[4], 8, 32)
		if err != nil {
			t.Fatalf("rpm --dump mode %q: %v", f[4], err)
		}
		rpmModes[f[0]] = os.FileMode(mode & 0o777).String()
	}
	files := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if d, r := files(debModes), files(rpmModes); !slices.Equal(d, r) {
		t.Fatalf("file lists differ:\ndeb %v\nrpm %v", d, r)
	}
	if list := strings.Fields(run(t, "rpm", "-qlp", p.rpm)); !slices.Equal(list, files(debModes)) {
		t.Errorf("rpm -qlp %v", list)
	}
	for f, dm := range debModes {
		if dm[1:] != rpmModes[f][1:] {
			t.Errorf("%s: mode %s in the deb, %s in the rpm", f, dm, rpmModes[f])
		}
	}
	if debModes["/usr/bin/unitvisor"] != "-rwxr-xr-x" {
		t.Errorf("/usr/bin/unitvisor mode %s", debModes["/usr/bin/unitvisor"])
	}
	debConf := strings.Fields(run(t, "dpkg-deb", "--info", p.deb, "conffiles"))
	rpmConf := strings.Fields(run(t, "rpm", "-qp", "--configfiles", p.rpm))
	if want := []string{"/etc/unitvisor/agent.hcl"}; !slices.Equal(debConf, want) || !slices.Equal(rpmConf, want) {
		t.Errorf("configuration files: deb %v, rpm %v; want %v", debConf, rpmConf, want)
	}
	scripts := run(t, "rpm", "-qp", "--scripts", p.rpm)
	for _, want := range []string{"postinstall scriptlet", "systemctl enable --now unitvisor.service", "preuninstall scriptlet", "postuninstall scriptlet"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("rpm scripts lack %q:\n%s", want, scripts)
		}
	}
}

// A second `make package` of the same tree gives the same bytes.
func TestReproducible(t *testing.T) {
	first := build(t)
	second, err := makePackage()
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{first.deb, second.deb}, {first.rpm, second.rpm}} {
		a, err := os.ReadFile(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(a) != sha256.Sum256(b) {
			t.Errorf("%s: two builds differ", filepath.Base(pair[0]))
		}
	}
}

const (
	service   = "unitvisor.service"
	unitFile  = "/usr/lib/systemd/system/unitvisor.service"
	maskPath  = "/etc/systemd/system/unitvisor.service"
	stateDir  = "/var/lib/unitvisor"
	ourUnits  = "uv-*@*.service"
	webJob    = "../../examples/web.hcl"
	watchdogD = "/run/systemd/system/unitvisor.service.d/50-test-watchdog.conf"
)

// asOnAHost runs a dpkg or apt command as on a normal host: in a mount
// namespace of its own where the machine's policy-rc.d (container images
// ship one that exits 101, so that no package starts a service) is hidden
// behind /bin/true.
func asOnAHost(args ...string) (string, error) {
	script := `if [ -e /usr/sbin/policy-rc.d ]; then mount --bind /bin/true /usr/sbin/policy-rc.d || exit 1; fi; exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func pkgStatus(t *testing.T) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", "unitvisor").Output()
	if err != nil {
		return "not-installed" // dpkg-query fails for a package it never saw
	}
	return strings.TrimSpace(string(out))
}

func listUnits(t *testing.T, pattern string) []string {
	t.Helper()
	out := run(t, "systemctl", "list-units", "--all", "--plain", "--no-legend", pattern)
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// prepare makes sure installing and purging the package destroys nothing:
// no unitvisor package but a leftover of this test in a throwaway
// container, no uv- unit of anyone else. It lifts the sandbox's mask of
// unitvisor.service (scripts/sandbox.sh keeps a package installed on the
// host from starting inside).
func prepare(t *testing.T) {
	t.Helper()
	inContainer := exec.Command("systemd-detect-virt", "--container", "--quiet").Run() == nil
	if st := pkgStatus(t); st != "not-installed" {
		if !inContainer {
			t.Fatalf("the unitvisor package is %s on this machine; this test installs and purges its own: run it through make test (the sandbox) or remove the package first", st)
		}
		if out, err := asOnAHost("apt-get", "purge", "-y", "unitvisor"); err != nil {
			t.Fatalf("purge a leftover package: %v\n%s", err, out)
		}
	}
	if u := listUnits(t, "uv-*"); len(u) > 0 {
		t.Fatalf("units of the prefix uv exist (%v): the packaged agent would adopt or stop them and purge would stop them; stop them first", u)
	}
	if _, err := os.Lstat(maskPath); err == nil {
		if !inContainer {
			t.Fatalf("%s exists: an admin's mask or unit; not touching it", maskPath)
		}
		// The sandbox binds /dev/null over it. Under that mount is the empty
		// file nspawn mounted onto, which systemd takes for a mask too. Both
		// go: the sandbox's /etc is an overlay thrown away with it.
		if fi, err := os.Lstat(maskPath); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			run(t, "umount", maskPath)
		}
		if fi, err := os.Lstat(maskPath); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
			os.Remove(maskPath)
		}
		if _, err := os.Lstat(maskPath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there after lifting the sandbox's mask: %v", maskPath, err)
		}
		run(t, "systemctl", "daemon-reload")
	}
}

func show(t *testing.T, unit, prop string) string { return sdtest.Show(t, unit, prop) }

func pids(t *testing.T, units []string) map[string]string {
	m := map[string]string{}
	for _, u := range units {
		m[u] = show(t, u, "MainPID")
		if m[u] == "0" || m[u] == "" {
			t.Fatalf("%s has no main process", u)
		}
	}
	return m
}

// The Debian package's whole life, as the acceptance describes it.
func TestDebInstallRestartPurge(t *testing.T) {
	p := build(t)
	prepare(t)
	purged := false
	t.Cleanup(func() {
		os.Remove(watchdogD)
		if !purged {
			if out, err := asOnAHost("apt-get", "purge", "-y", "unitvisor"); err != nil {
				t.Errorf("purge in cleanup: %v\n%s", err, out)
			}
			sdtest.Cleanup(t, "uv")
		}
	})

	// dpkg -i enables and starts the agent; it is active only after its
	// READY=1 (Type=notify).
	if out, err := asOnAHost("dpkg", "-i", p.deb); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	if st := strings.TrimSpace(run(t, "systemctl", "is-active", service)); st != "active" {
		t.Fatalf("after dpkg -i: %s is %s\n%s", service, st, run(t, "journalctl", "-u", service, "--no-pager", "-n", "50"))
	}
	if st, _ := exec.Command("systemctl", "is-enabled", service).Output(); strings.TrimSpace(string(st)) != "enabled" {
		t.Errorf("after dpkg -i: %s is %s, want enabled", service, st)
	}
	for prop, want := range map[string]string{"Type": "notify", "WatchdogUSec": "2min", "KillMode": "mixed",
		"Restart": "on-failure", "StatusErrno": "0", "NRestarts": "0"} {
		if got := show(t, service, prop); got != want {
			t.Errorf("%s %s=%s, want %s", service, prop, got, want)
		}
	}

	verify, err := exec.Command("systemd-analyze", "verify", unitFile).CombinedOutput()
	if err != nil || bytes.Contains(verify, []byte("unitvisor")) {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, verify)
	}
	sec, _ := exec.Command("systemd-analyze", "security", "--no-pager", service).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for unitvisor\.service: ([0-9.]+) (\S+)`).FindSubmatch(sec)
	if m == nil {
		t.Fatalf("systemd-analyze security:\n%s", sec)
	}
	t.Logf("systemd-analyze security %s: %s %s", service, m[1], m[2])
	if lvl := string(m[2]); lvl != "OK" && lvl != "SAFE" {
		t.Errorf("exposure %s %s: the hardening in packaging/files/unitvisor.service regressed", m[1], lvl)
	}

	// The example job, through the packaged CLI and the default socket.
	job, err := filepath.Abs(webJob)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/bin/unitvisor", "job", "run", "-timeout", "90s", job).CombinedOutput(); err != nil {
		t.Fatalf("unitvisor job run %s: %v\n%s\n%s", job, err, out, run(t, "journalctl", "-u", service, "--no-pager", "-n", "50"))
	}
	tasks := []string{"uv-web-api@0.service", "uv-web-api@1.service"}
	for _, u := range tasks {
		if st := show(t, u, "ActiveState"); st != "active" {
			t.Fatalf("%s is %s", u, st)
		}
	}
	before := pids(t, tasks)
	serving(t)
	if _, err := os.Stat(filepath.Join(stateDir, "state.db")); err != nil {
		t.Errorf("the agent's store: %v", err)
	}

	// Restart the agent under a short watchdog (a runtime drop-in): the
	// tasks keep their processes, and the agent, pinging from its loop,
	// is not killed by the watchdog.
	if err := os.MkdirAll(filepath.Dir(watchdogD), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(watchdogD, []byte("[Service]\nWatchdogSec=3s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "systemctl", "daemon-reload")
	agentPID := show(t, service, "MainPID")
	run(t, "systemctl", "restart", service)
	if st := strings.TrimSpace(run(t, "systemctl", "is-active", service)); st != "active" {
		t.Fatalf("after restart: %s is %s", service, st)
	}
	newPID := show(t, service, "MainPID")
	if newPID == agentPID {
		t.Fatalf("the agent kept PID %s across systemctl restart", agentPID)
	}
	if after := pids(t, tasks); !maps(after, before) {
		t.Fatalf("systemctl restart %s changed the tasks' main PIDs: %v -> %v", service, before, after)
	}
	time.Sleep(8 * time.Second) // more than two watchdog periods
	if got := show(t, service, "MainPID"); got != newPID || show(t, service, "ActiveState") != "active" {
		t.Fatalf("under WatchdogSec=3s the agent went from PID %s to %s (%s, result %s)\n%s", newPID, got,
			show(t, service, "ActiveState"), show(t, service, "Result"), run(t, "journalctl", "-u", service, "--no-pager", "-n", "30"))
	}
	if after := pids(t, tasks); !maps(after, before) {
		t.Fatalf("tasks' main PIDs changed after the agent restart: %v -> %v", before, after)
	}
	serving(t)
	os.Remove(watchdogD)
	run(t, "systemctl", "daemon-reload")

	// An upgrade (the same package again) restarts the agent, not the tasks.
	if out, err := asOnAHost("dpkg", "-i", p.deb); err != nil {
		t.Fatalf("dpkg -i over the installed package: %v\n%s", err, out)
	}
	if got := show(t, service, "MainPID"); got == newPID || show(t, service, "ActiveState") != "active" {
		t.Errorf("after an upgrade the agent is %s with PID %s (was %s): postinst did not restart it",
			show(t, service, "ActiveState"), got, newPID)
	}
	if after := pids(t, tasks); !maps(after, before) {
		t.Fatalf("an upgrade changed the tasks' main PIDs: %v -> %v", before, after)
	}

	// Removal stops the agent and leaves the tasks and the state alone.
	if out, err := asOnAHost("dpkg", "-r", "unitvisor"); err != nil {
		t.Fatalf("dpkg -r: %v\n%s", err, out)
	}
	if st := show(t, service, "ActiveState"); st != "inactive" {
		t.Errorf("after dpkg -r %s is %s", service, st)
	}
	if after := pids(t, tasks); !maps(after, before) {
		t.Fatalf("dpkg -r changed the tasks' main PIDs: %v -> %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.db")); err != nil {
		t.Errorf("after dpkg -r the agent's store is gone: %v", err)
	}

	// Purge: no unit of ours, no state, no task process.
	out, err := asOnAHost("apt-get", "purge", "-y", "unitvisor")
	purged = true
	if err != nil {
		t.Fatalf("apt-get purge: %v\n%s", err, out)
	}
	if st := pkgStatus(t); st != "not-installed" {
		t.Errorf("after purge the package is %s", st)
	}
	if u := listUnits(t, "uv-*"); len(u) > 0 {
		t.Errorf("after purge these units are left: %v", u)
	}
	if ls := show(t, service, "LoadState"); ls != "not-found" {
		t.Errorf("after purge %s is %s", service, ls)
	}
	for _, path := range []string{stateDir, "/etc/unitvisor", "/run/unitvisor/unitvisor.sock", "/run/unitvisor/crun/uv", "/usr/bin/unitvisor",
		"/etc/systemd/system/multi-user.target.wants/unitvisor.service", maskPath} {
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after purge %s is still there (%v)", path, err)
		}
	}
	for u, pid := range before {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("after purge the process %s of %s still runs", pid, u)
		}
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// serving checks that each instance of the example job answers HTTP on
// the port the agent gave it.
func serving(t *testing.T) {
	t.Helper()
	out, err := exec.Command("/usr/bin/unitvisor", "job", "status", "-json", "web").Output()
	if err != nil {
		t.Fatalf("unitvisor job status: %v", err)
	}
	var js []supervisor.JobStatus
	if err := json.Unmarshal(out, &js); err != nil || len(js) != 1 || len(js[0].Instances) != 2 {
		t.Fatalf("job status -json: %v\n%s", err, out)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for _, in := range js[0].Instances {
		url := fmt.Sprintf("http://127.0.0.1:%d/", in.Ports["http"])
		sdtest.Eventually(t, 15*time.Second, in.Unit+" serving "+url, func() bool {
			resp, err := client.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}
