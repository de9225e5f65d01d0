//go:build integration

package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

func journal(t *testing.T, match ...string) string {
	t.Helper()
	out, err := exec.Command("journalctl", append([]string{"-q", "--no-pager", "-o", "cat"}, match...)...).Output()
	if err != nil {
		t.Fatalf("journalctl %v: %v", match, err)
	}
	return string(out)
}

func mainPID(t *testing.T, unit string) int {
	t.Helper()
	pid, _ := strconv.Atoi(sdtest.Show(t, unit, "MainPID"))
	return pid
}

// procUID returns the real uid of a process.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatal("no Uid in status")
	return ""
}

func waitActive(t *testing.T, units ...string) {
	t.Helper()
	for _, u := range units {
		sdtest.Eventually(t, 20*time.Second, u+" active", func() bool { return sdtest.Show(t, u, "ActiveState") == "active" })
	}
}

// cmdline returns a process's command line, arguments joined by spaces.
func cmdline(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
