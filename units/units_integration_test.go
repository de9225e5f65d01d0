//go:build integration

package units_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
	"github.com/unitvisor/unitvisor/units"
)

func TestStartLiteralArgsAndWatch(t *testing.T) {
	conn := sdtest.Conn(t)
	namer := sdtest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := units.NewWatcher(conn, namer, 5*time.Second, sdtest.Logger(t))
	go w.Run(ctx)
	<-w.Synced()

	name, _ := namer.Name("job-a", "echo", 0)
	spec := units.Spec{Name: name, Properties: []units.Property{
		units.String("Description", "test"),
		units.String("Type", "exec"),
		units.String("Slice", "unitvisor-test.slice"),
		units.ExecStart([]string{"/bin/sh", "-c", `echo "args:$1:$2"; sleep 30`, "sh", "$HOME", "${PATH}"}),
		units.LogExtraFields(map[string]string{"UNITVISOR_JOB": "job-a"}),
		units.String("Restart", "on-failure"),
		units.USec("RestartUSec", 100*time.Millisecond),
		units.Uint32("StartLimitBurst", 3),
		units.USec("StartLimitIntervalUSec", time.Minute),
	}}
	if err := conn.Start(ctx, spec, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var st units.State
	for st.ActiveState != "active" {
		select {
		case ev := <-w.Events():
			if ev.Name == name {
				st = ev.State
				t.Logf("event %+v", st)
			}
		case <-ctx.Done():
			t.Fatal("no active event")
		}
	}
	if st.MainPID == 0 || st.InvocationID == "" {
		t.Fatalf("want MainPID and InvocationID in %+v", st)
	}
	if got := sdtest.Show(t, name, "Slice"); got != "unitvisor-test.slice" {
		t.Fatalf("slice %q", got)
	}
	sdtest.Eventually(t, 5*time.Second, "journal line", func() bool {
		out, _ := exec.Command("journalctl", "-q", "-o", "cat", "UNITVISOR_JOB=job-a").Output()
		return strings.Contains(string(out), "args:$HOME:${PATH}")
	})

	// Crash it: systemd restarts it and the watcher sees NRestarts go up.
	exec.Command("systemctl", "kill", "--signal=KILL", name).Run()
	sdtest.Eventually(t, 10*time.Second, "restart seen by watcher", func() bool {
		s, _ := w.Get(name)
		return s.NRestarts >= 1 && s.Running()
	})
	if err := conn.Stop(ctx, name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	sdtest.Eventually(t, 10*time.Second, "gone", func() bool {
		_, ok := w.Get(name)
		return !ok
	})
}

func TestRestartLimitSemantics(t *testing.T) {
	conn := sdtest.Conn(t)
	namer := sdtest.Prefix(t)
	ctx := context.Background()
	name, _ := namer.Name("lim", "x", 0)
	err := conn.Start(ctx, units.Spec{Name: name, Properties: []units.Property{
		units.String("Type", "exec"),
		units.ExecStart([]string{"/bin/sh", "-c", "sleep 0.2; exit 3"}),
		units.String("Restart", "on-failure"),
		units.USec("RestartUSec", 100*time.Millisecond),
		units.Uint32("StartLimitBurst", 4),
		units.USec("StartLimitIntervalUSec", time.Minute),
	}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sdtest.Eventually(t, 20*time.Second, "failed", func() bool { return sdtest.Show(t, name, "ActiveState") == "failed" })
	time.Sleep(time.Second)
	t.Logf("NRestarts=%s Result=%s ExecMainStatus=%s", sdtest.Show(t, name, "NRestarts"), sdtest.Show(t, name, "Result"), sdtest.Show(t, name, "ExecMainStatus"))
}

// After a daemon-reexec (systemd re-executes and re-attaches to the bus)
// starts must work and the watcher must keep seeing signals: systemd keeps
// its subscribers across the re-exec, and where a connection does drop
// (a private connection, a bus restart) the Conn and the Watcher redial.
func TestSurvivesDaemonReexec(t *testing.T) {
	conn := sdtest.Conn(t)
	namer := sdtest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := units.NewWatcher(conn, namer, time.Hour, sdtest.Logger(t))
	go w.Run(ctx)
	<-w.Synced()
	if out, err := exec.Command("systemctl", "daemon-reexec").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reexec: %v %s", err, out)
	}
	name, _ := namer.Name("reexec", "after", 0)
	var err error
	sdtest.Eventually(t, 20*time.Second, "start after reexec", func() bool {
		err = conn.Start(ctx, units.Spec{Name: name, Properties: []units.Property{
			units.String("Type", "exec"), units.ExecStart([]string{"/bin/sleep", "60"}),
		}}, 10*time.Second)
		return err == nil
	})
	// The heal interval is an hour: only signals (after the watcher's own
	// reconnect) can bring this state.
	sdtest.Eventually(t, 20*time.Second, "watcher sees the unit started after reexec", func() bool {
		s, ok := w.Get(name)
		return ok && s.Running()
	})
}

// Commands must survive daemon-reload. systemd 252 drops ExecStartEx from
// a transient unit on reload, and garbles ";", "$", quotes and backslashes
// of the classic form (see ReloadSafe); a reload-safe command line comes
// back intact, "%" and spaces included, and restarts run it unchanged.
func TestReloadSafeCommandSurvivesDaemonReload(t *testing.T) {
	conn := sdtest.Conn(t)
	namer := sdtest.Prefix(t)
	ctx := context.Background()
	script := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"literal|$1|$2\"\nsleep 0.5\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	argv := []string{"/bin/sh", script, "pct%n", "with space"}
	if !units.ReloadSafe(argv) {
		t.Fatal("argv should be reload-safe")
	}
	for _, bad := range [][]string{{"/bin/sh", "-c", "a; b"}, {"/bin/echo", "$HOME"}, {"/bin/echo", `"q"`}, {"/bin/echo", ""}} {
		if units.ReloadSafe(bad) {
			t.Fatalf("%q reported reload-safe", bad)
		}
	}
	name, _ := namer.Name("reload", "x", 0)
	err := conn.Start(ctx, units.Spec{Name: name, Properties: []units.Property{
		units.String("Type", "exec"),
		units.ExecStart(argv),
		units.LogExtraFields(map[string]string{"UNITVISOR_JOB": name}),
		units.String("Restart", "on-failure"),
		units.USec("RestartUSec", 200*time.Millisecond),
		units.Uint32("StartLimitBurst", 3),
		units.USec("StartLimitIntervalUSec", time.Minute),
	}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("journalctl", "-q", "-o", "cat", "UNITVISOR_JOB="+name).Output()
		if strings.Count(string(out), "literal|pct%n|with space\n") == 3 {
			break
		}
		if time.Now().After(deadline) {
			unit, _ := exec.Command("journalctl", "-q", "-o", "cat", "-u", name).CombinedOutput()
			t.Fatalf("no three intact runs after the reload:\n%s\n%s", out, unit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
