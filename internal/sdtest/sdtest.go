// Package sdtest is the real-systemd test harness: it connects integration
// tests to a running systemd (the host's, or the nspawn sandbox's that
// scripts/sandbox.sh boots) and cleans up the units a test leaves behind.
//
// Integration tests are built with the "integration" tag and never skip:
// without a systemd they fail, so a missing systemd in CI is red, not green.
package sdtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/units"
)

// Conn returns a connection to the running systemd, or fails the test.
func Conn(t testing.TB) *units.Conn {
	t.Helper()
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Fatalf("no running systemd (/run/systemd/system missing): run integration tests through scripts/sandbox.sh or `make test`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := units.Dial(ctx, Logger(t))
	if err != nil {
		t.Fatalf("dial systemd: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var seq atomic.Int64

// Prefix returns a unit prefix unique to this test process and call, so
// tests (and test packages run in parallel) never touch each other's units.
// It stops and resets every unit with that prefix when the test ends.
func Prefix(t testing.TB) units.Namer {
	t.Helper()
	p := fmt.Sprintf("t%xs%x", os.Getpid()&0xfffff, seq.Add(1)) // "s" separates: t1a+23 vs t1a2+3
	n, err := units.NewNamer(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Cleanup(t, p) })
	return n
}

// Cleanup stops and resets all units named prefix-*.
func Cleanup(t testing.TB, prefix string) {
	out, _ := exec.Command("systemctl", "list-units", "--all", "--plain", "--no-legend", prefix+"-*").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		exec.Command("systemctl", "kill", "--signal=KILL", f[0]).Run()
		exec.Command("systemctl", "stop", f[0]).Run()
		exec.Command("systemctl", "reset-failed", f[0]).Run()
	}
}

// Logger logs to the test log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// Show returns `systemctl show -p PROP --value UNIT`.
func Show(t testing.TB, unit, prop string) string {
	t.Helper()
	out, err := exec.Command("systemctl", "show", "-p", prop, "--value", unit).Output()
	if err != nil {
		t.Fatalf("systemctl show %s %s: %v", unit, prop, err)
	}
	return strings.TrimSpace(string(out))
}

// Eventually polls cond until it holds or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// Kill sends SIGKILL to a unit's processes (`systemctl kill`).
func Kill(t testing.TB, unit string) {
	t.Helper()
	if out, err := exec.Command("systemctl", "kill", "--signal=KILL", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl kill %s: %v %s", unit, err, out)
	}
}
