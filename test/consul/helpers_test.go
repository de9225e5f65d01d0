//go:build integration

package consul

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/consulbridge"
	"github.com/unitvisor/unitvisor/internal/consultest"
	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// startAgent starts a unitvisor agent whose consul block points at addr.
func startAgent(t *testing.T, addr, syncInterval, extra string) *sdtest.Agent {
	t.Helper()
	return sdtest.StartAgent(t, fmt.Sprintf("consul {\n  address = %q\n  sync_interval = %q\n%s}\n", addr, syncInterval, extra))
}

// nodeID is the agent's node identity, which the bridge keeps in the data dir.
func nodeID(t *testing.T, a *sdtest.Agent) string {
	t.Helper()
	var id string
	consultest.Eventually(t, 10*time.Second, "node-id in the data dir", func() bool {
		b, err := os.ReadFile(filepath.Join(a.DataDir, "node-id"))
		id = strings.TrimSpace(string(b))
		return err == nil && id != ""
	})
	return id
}

func serviceID(t *testing.T, a *sdtest.Agent, job, task string, index int, service string) string {
	return consulbridge.ServiceID(nodeID(t, a), job, task, index, service)
}

// check returns a check's status and output as the local Consul agent has it.
func check(t *testing.T, c *api.Client, id string) (string, string) {
	t.Helper()
	checks, err := c.Agent().Checks()
	if err != nil {
		return "", ""
	}
	if ch := checks[id]; ch != nil {
		return ch.Status, ch.Output
	}
	return "", ""
}

// waitCheck waits for a check to have status and an output containing
// output, and returns how long that took.
func waitCheck(t *testing.T, c *api.Client, id, status, output string, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	var got, out string
	deadline := began.Add(timeout)
	for time.Now().Before(deadline) {
		got, out = check(t, c, id)
		if got == status && strings.Contains(out, output) {
			return time.Since(began)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("check %s: after %s it is %q (%q), want %q with %q", id, timeout, got, out, status, output)
	return 0
}

func services(t *testing.T, c *api.Client) map[string]*api.AgentService {
	t.Helper()
	s, err := c.Agent().Services()
	if err != nil {
		t.Fatalf("list services: %v", err)
	}
	return s
}

func has(t *testing.T, c *api.Client, id string) bool {
	t.Helper()
	return services(t, c)[id] != nil
}
