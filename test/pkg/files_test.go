package pkg

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// The packaged configuration is valid and has the defaults the package
// promises: exec on, raw_exec off, metrics on loopback, no Consul bridge.
func TestPackagedConfig(t *testing.T) {
	src, err := os.ReadFile("../../packaging/files/agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("agent.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DriverEnabled("exec") || cfg.DriverEnabled("raw_exec") {
		t.Errorf("drivers: exec %v, raw_exec %v", cfg.DriverEnabled("exec"), cfg.DriverEnabled("raw_exec"))
	}
	if !strings.HasPrefix(cfg.Metrics.Address, "127.0.0.1:") {
		t.Errorf("metrics address %q is not on loopback", cfg.Metrics.Address)
	}
	if cfg.Consul != nil {
		t.Error("the packaged config enables Consul")
	}
	if cfg.DataDir != "/var/lib/unitvisor" || cfg.Socket != "/run/unitvisor/unitvisor.sock" || cfg.UnitPrefix != "uv" {
		t.Errorf("data_dir %s, socket %s, prefix %s: the unit's StateDirectory=, RuntimeDirectory= and the purge expect the defaults",
			cfg.DataDir, cfg.Socket, cfg.UnitPrefix)
	}
}

var helpCommand = regexp.MustCompile(`^  ([a-z][a-z-]*)(?: ([a-z]+))?\b.*?  +(.*)$`)

// Bash completion offers every command `unitvisor help` lists, except the
// internal ones.
func TestCompletionCoversHelp(t *testing.T) {
	comp, err := os.ReadFile("../../packaging/files/unitvisor.bash-completion")
	if err != nil {
		t.Fatal(err)
	}
	help, err := exec.Command(sdtest.Binary(t), "help").Output()
	if err != nil {
		t.Fatalf("unitvisor help: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(help), "\n") {
		m := helpCommand.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[3], "(internal)") {
			continue
		}
		n++
		for _, word := range []string{m[1], m[2]} {
			if word != "" && !regexp.MustCompile(`\b`+word+`\b`).Match(comp) {
				t.Errorf("completion lacks %q (help: %s)", word, strings.TrimSpace(line))
			}
		}
	}
	if n < 5 {
		t.Fatalf("found only %d commands in the help text:\n%s", n, help)
	}
}
