//go:build integration

package consul

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/consulbridge"
	"github.com/unitvisor/unitvisor/internal/consultest"
	"github.com/unitvisor/unitvisor/internal/sdtest"
)

// TestServicesAndChecksFollowUnits: two services with their tags, meta and
// ports; TTL health following the unit (kill -> critical, a restart ->
// warning then passing); http and tcp checks run by Consul; a script check
// run in the task's context; check_restart.
func TestServicesAndChecksFollowUnits(t *testing.T) {
	c := consultest.Start(t)
	cc := c.Client(t, "")
	a := startAgent(t, c.HTTPAddr, "5s", "")
	job := "svc" + a.Prefix
	file := sdtest.WriteJob(t, "svc.hcl", fmt.Sprintf(`
job %[1]q {
  task "web" {
    driver = "exec"
    config {
      command = "/usr/bin/python3"
      args    = ["-m", "http.server", "${UNITVISOR_PORT_http}", "--bind", "127.0.0.1"]
    }
    env { GREETING = "hello-${UNITVISOR_INDEX}" }
    port "http" {}
    port "admin" {}
    restart { attempts = 0 }
    service {
      name = "web-%[2]s"
      port = "http"
      tags = ["v1", "i${UNITVISOR_INDEX}"]
      meta { team = "core" }
    }
    service {
      name = "admin-%[2]s"
      port = "admin"
      tags = ["admin"]
      meta { kind = "admin" }
    }
    service {
      name = "probe-%[2]s"
      port = "http"
      check {
        type     = "http"
        path     = "/"
        interval = "1s"
        timeout  = "1s"
      }
      check {
        type     = "tcp"
        interval = "1s"
        timeout  = "1s"
      }
      check {
        type     = "script"
        command  = "/bin/sh"
        args     = ["-c", "id -un; pwd; echo $GREETING; test -e local/ok || exit 2"]
        interval = "1s"
        timeout  = "5s"
      }
    }
  }
  task "worker" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    restart {
      attempts = 3
      interval = "10m"
      delay    = "2s"
    }
    service { name = "worker-%[2]s" }
  }
  task "flaky" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    service {
      name = "flaky-%[2]s"
      check {
        type     = "script"
        command  = "/bin/sh"
        args     = ["-c", "echo broken; exit 2"]
        interval = "1s"
        check_restart {
          limit = 2
          grace = "1s"
        }
      }
    }
  }
}`, job, a.Prefix))
	a.MustCLI("job", "run", file)
	web := a.Instance(job, "web", 0)
	webID := serviceID(t, a, job, "web", 0, "web-"+a.Prefix)
	adminID := serviceID(t, a, job, "web", 0, "admin-"+a.Prefix)
	probeID := serviceID(t, a, job, "web", 0, "probe-"+a.Prefix)
	workerID := serviceID(t, a, job, "worker", 0, "worker-"+a.Prefix)

	for _, id := range []string{webID, adminID, workerID} {
		waitCheck(t, cc, consulbridge.CheckID(id, "ttl"), api.HealthPassing, "active (running)", 15*time.Second)
	}
	svcs := services(t, cc)
	for _, want := range []struct {
		id, name string
		port     int
		tags     []string
		meta     map[string]string
	}{
		{webID, "web-" + a.Prefix, web.Ports["http"], []string{"v1", "i0"}, map[string]string{"team": "core"}},
		{adminID, "admin-" + a.Prefix, web.Ports["admin"], []string{"admin"}, map[string]string{"kind": "admin"}},
	} {
		s := svcs[want.id]
		if s == nil {
			t.Fatalf("service %s not registered; have %v", want.id, keys(svcs))
		}
		if s.Service != want.name || s.Port != want.port || !reflect.DeepEqual(s.Tags, want.tags) {
			t.Errorf("service %s: name %q port %d tags %v; want %q %d %v", want.id, s.Service, s.Port, s.Tags, want.name, want.port, want.tags)
		}
		for k, v := range want.meta {
			if s.Meta[k] != v {
				t.Errorf("service %s meta %s = %q, want %q", want.id, k, s.Meta[k], v)
			}
		}
		if s.Meta["external-source"] != "unitvisor" || s.Meta["unitvisor-unit"] != a.Unit(job, "web", 0) {
			t.Errorf("service %s meta %v", want.id, s.Meta)
		}
	}

	// Consul runs the http and tcp checks against the task's port.
	waitCheck(t, cc, consulbridge.CheckID(probeID, "http"), api.HealthPassing, "200", 20*time.Second)
	waitCheck(t, cc, consulbridge.CheckID(probeID, "tcp"), api.HealthPassing, "Success", 20*time.Second)
	// The script check runs as the task's user, in its directory, with its
	// environment; its result arrives as a TTL update.
	dir := filepath.Join(a.DataDir, "tasks", job, "web", "0")
	script := consulbridge.CheckID(probeID, "script")
	waitCheck(t, cc, script, api.HealthCritical, "nobody\n"+dir+"\nhello-0", 20*time.Second)
	if err := os.WriteFile(filepath.Join(dir, "local", "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitCheck(t, cc, script, api.HealthPassing, "nobody", 10*time.Second)

	// kill -9 without a restart policy: critical, pushed on the D-Bus event.
	unit := a.Unit(job, "web", 0)
	killed := time.Now()
	if out, err := exec.Command("systemctl", "kill", "--signal=KILL", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl kill: %v %s", err, out)
	}
	waitCheck(t, cc, consulbridge.CheckID(webID, "ttl"), api.HealthCritical, "signal 9", 10*time.Second)
	t.Logf("kill -9 to critical in Consul: %s", time.Since(killed))
	waitCheck(t, cc, consulbridge.CheckID(adminID, "ttl"), api.HealthCritical, "result signal", 5*time.Second)

	// A restart (policy: 2s delay) shows warning, then passing, never critical.
	wunit := a.Unit(job, "worker", 0)
	if out, err := exec.Command("systemctl", "kill", "--signal=KILL", wunit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl kill: %v %s", err, out)
	}
	wttl := consulbridge.CheckID(workerID, "ttl")
	var statuses []string
	consultest.Eventually(t, 20*time.Second, "worker warning, then passing", func() bool {
		s, _ := check(t, cc, wttl)
		if n := len(statuses); s != "" && (n == 0 || statuses[n-1] != s) {
			statuses = append(statuses, s)
		}
		return slices.Contains(statuses, api.HealthWarning) && s == api.HealthPassing
	})
	if slices.Contains(statuses, api.HealthCritical) {
		t.Errorf("a restart showed %v, want warning then passing, never critical", statuses)
	}

	// check_restart: the flaky task is restarted after 2 critical results.
	funit := a.Unit(job, "flaky", 0)
	first := sdtest.Show(t, funit, "InvocationID")
	sdtest.Eventually(t, 30*time.Second, "flaky task restarted by check_restart", func() bool {
		inv := sdtest.Show(t, funit, "InvocationID")
		return inv != "" && inv != first
	})
	if !strings.Contains(a.Log(), "check_restart") {
		t.Errorf("agent log does not tell why the task was restarted")
	}
}

// TestJobStopAndAgentRestart: job stop removes the services; an agent
// killed with SIGKILL and started again neither duplicates, loses nor
// flaps a registration; services it does not own stay.
func TestJobStopAndAgentRestart(t *testing.T) {
	c := consultest.Start(t)
	cc := c.Client(t, "")
	a := startAgent(t, c.HTTPAddr, "2s", "")
	job := "rs" + a.Prefix
	name := "api-" + a.Prefix
	file := sdtest.WriteJob(t, "rs.hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    count  = 2
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    port "http" {}
    service {
      name = %q
      port = "http"
    }
  }
}`, job, name))
	a.MustCLI("job", "run", file)
	ids := []string{serviceID(t, a, job, "api", 0, name), serviceID(t, a, job, "api", 1, name)}
	for _, id := range ids {
		waitCheck(t, cc, consulbridge.CheckID(id, "ttl"), api.HealthPassing, "running", 15*time.Second)
	}
	// Registered by hand: same name; and an ID in our shape without our meta.
	hand := []*api.AgentServiceRegistration{
		{ID: name + "-by-hand", Name: name, Port: 1},
		{ID: ids[0] + "x", Name: name, Port: 2},
	}
	for _, r := range hand {
		if err := cc.Agent().ServiceRegister(r); err != nil {
			t.Fatal(err)
		}
	}

	// Watch the catalog while the agent is killed and comes back.
	var mu sync.Mutex
	var problems []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			svcs, err := cc.Agent().Services()
			if err != nil {
				continue
			}
			checks, err := cc.Agent().Checks()
			if err != nil {
				continue
			}
			n := 0
			for _, s := range svcs {
				if s.Service == name {
					n++
				}
			}
			mu.Lock()
			if n != len(ids)+len(hand) {
				problems = append(problems, fmt.Sprintf("%d services named %s", n, name))
			}
			for _, id := range ids {
				if ch := checks[consulbridge.CheckID(id, "ttl")]; ch == nil || ch.Status != api.HealthPassing {
					problems = append(problems, fmt.Sprintf("%s not passing: %+v", id, ch))
				}
			}
			mu.Unlock()
		}
	}()
	a.Kill()
	time.Sleep(time.Second)
	a.Start()
	time.Sleep(3 * 2 * time.Second) // past the probation (one sync interval) and two more syncs
	close(stop)
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("registrations flapped or were duplicated across the agent restart (%d times), first: %s", len(problems), problems[0])
	}

	a.MustCLI("job", "stop", job)
	for _, id := range ids {
		if has(t, cc, id) {
			t.Errorf("service %s still registered after job stop", id)
		}
	}
	for _, r := range hand {
		if !has(t, cc, r.ID) {
			t.Errorf("hand-registered service %s was removed", r.ID)
		}
	}
}

// TestConsulOutage: Consul is stopped for 30s while one job is submitted
// and another stopped; tasks start and stop as usual, and once Consul is
// back (empty: a dev agent keeps nothing) the catalog matches within one
// sync interval.
func TestConsulOutage(t *testing.T) {
	const syncInterval = 10 * time.Second
	c := consultest.Start(t)
	cc := c.Client(t, "")
	a := startAgent(t, c.HTTPAddr, syncInterval.String(), "")
	jobFile := func(job string) string {
		return sdtest.WriteJob(t, job+".hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    shutdown_delay = "1s"
    service { name = %q }
  }
}`, job, job))
	}
	old, fresh := "old"+a.Prefix, "new"+a.Prefix
	a.MustCLI("job", "run", jobFile(old))
	oldID := serviceID(t, a, old, "api", 0, old)
	waitCheck(t, cc, consulbridge.CheckID(oldID, "ttl"), api.HealthPassing, "running", 15*time.Second)

	c.Stop()
	down := time.Now()
	began := time.Now()
	a.MustCLI("job", "run", jobFile(fresh))
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("job run took %s while Consul was down", took)
	}
	began = time.Now()
	a.MustCLI("job", "stop", old)
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("job stop took %s while Consul was down", took)
	}
	if st := sdtest.Show(t, a.Unit(fresh, "api", 0), "ActiveState"); st != "active" {
		t.Fatalf("the new job's task is %s while Consul is down", st)
	}
	time.Sleep(time.Until(down.Add(30 * time.Second)))

	c.Start()
	back := time.Now()
	freshID := serviceID(t, a, fresh, "api", 0, fresh)
	waitCheck(t, cc, consulbridge.CheckID(freshID, "ttl"), api.HealthPassing, "running", syncInterval)
	t.Logf("catalog converged %s after Consul came back", time.Since(back))
	if has(t, cc, oldID) {
		t.Fatal("the stopped job's service is registered")
	}
	if !strings.Contains(a.Log(), "consul is unreachable") {
		t.Error("the agent did not log the outage")
	}
}

// TestSteadyStateCallsDoNotGrow counts the agent's calls to Consul through
// a proxy: in steady state each sync makes one services and one checks
// listing, with 10 tasks as with 100.
func TestSteadyStateCallsDoNotGrow(t *testing.T) {
	const syncInterval = 2 * time.Second
	c := consultest.Start(t)
	cc := c.Client(t, "")
	proxy := newCountingProxy(t, c.HTTPAddr)
	a := startAgent(t, proxy.addr, syncInterval.String(), "")
	job := "many" + a.Prefix
	run := func(count int) {
		file := sdtest.WriteJob(t, "many.hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    count  = %d
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    service { name = "many-%s" }
  }
}`, job, count, a.Prefix))
		a.MustCLI("job", "run", "-timeout", "5m", file)
		consultest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d passing checks", count), func() bool {
			checks, err := cc.Agent().Checks()
			if err != nil {
				return false
			}
			n := 0
			for _, ch := range checks {
				if ch.Status == api.HealthPassing && strings.Contains(ch.Output, "running") && strings.HasPrefix(ch.ServiceName, "many-") {
					n++
				}
			}
			return n == count
		})
	}
	measure := func() map[string]int {
		time.Sleep(syncInterval) // let in-flight writes end
		proxy.reset()
		time.Sleep(3 * syncInterval)
		return proxy.counts()
	}
	run(10)
	at10 := measure()
	run(100)
	at100 := measure()
	t.Logf("Consul calls in 3 sync intervals: 10 tasks %v, 100 tasks %v", at10, at100)
	for n, calls := range map[int]map[string]int{10: at10, 100: at100} {
		syncs := calls["GET /v1/agent/services"]
		if syncs < 2 || syncs > 4 || calls["GET /v1/agent/checks"] != syncs || len(calls) != 2 {
			t.Errorf("%d tasks: calls %v; want one services and one checks listing per sync interval and nothing else", n, calls)
		}
	}
}

// TestACLToken: with ACLs on (default deny), the agent registers and
// updates checks with a token from token_file that may write services.
func TestACLToken(t *testing.T) {
	root := "9a4c8f5e-2b1d-4e6a-8c3f-7d0e1b2a3c4d"
	c := consultest.Start(t, consultest.WithACL(root))
	cc := c.Client(t, root)
	policy, _, err := cc.ACL().PolicyCreate(&api.ACLPolicy{Name: "unitvisor",
		Rules: `service_prefix "" { policy = "write" }
node_prefix "" { policy = "read" }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := cc.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: policy.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "consul.token")
	if err := os.WriteFile(tokenFile, []byte(token.SecretID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without a token nothing may be read or written.
	if err := c.Client(t, "").Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "x"}); err == nil {
		t.Fatal("consul accepts anonymous writes: ACLs are not on")
	}
	a := startAgent(t, c.HTTPAddr, "5s", fmt.Sprintf("  token_file = %q\n", tokenFile))
	job := "acl" + a.Prefix
	a.MustCLI("job", "run", sdtest.WriteJob(t, "acl.hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    service { name = "acl-%s" }
  }
}`, job, a.Prefix)))
	id := serviceID(t, a, job, "api", 0, "acl-"+a.Prefix)
	waitCheck(t, cc, consulbridge.CheckID(id, "ttl"), api.HealthPassing, "running", 15*time.Second)
	a.MustCLI("job", "stop", job)
	if has(t, cc, id) {
		t.Fatal("service still registered after job stop")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
