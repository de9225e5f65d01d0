// Package consultest runs real Consul agents for integration tests: the
// binary `make consul` builds from the tools module tools/consul into
// .cache/bin/consul, started as `consul agent -dev` on loopback with every
// port (http, dns, serf lan/wan, server, grpc, grpc_tls) a free one, and stopped when
// the test ends. Without the binary the test fails: integration tests never
// skip.
package consultest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// BinaryEnv names the variable that overrides the Consul binary's path.
const BinaryEnv = "UV_CONSUL_BIN"

// Binary returns the Consul binary: $UV_CONSUL_BIN, or .cache/bin/consul
// at the root of the checkout.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "tools", "consul", "go.mod")); err == nil {
				break
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("consultest: checkout root (with tools/consul) not found above the working directory")
		}
		dir = parent
	}
	bin := filepath.Join(dir, ".cache", "bin", "consul")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("consultest: no Consul binary at %s: run `make consul` (the integration-test target does), or set %s", bin, BinaryEnv)
	}
	return bin
}

var seq atomic.Int64

// Agent is a Consul dev agent started by a test.
type Agent struct {
	t     testing.TB
	bin   string
	args  []string
	Ports map[string]int // http, dns, serf_lan, serf_wan, server, grpc, grpc_tls
	// HTTPAddr is host:port of the HTTP API.
	HTTPAddr string
	// Token is the management token when ACLs are on.
	Token string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *lockedBuffer
}

// Option changes how the agent runs.
type Option func(*Agent)

// WithACL turns ACLs on (default deny) with token as the management and
// agent token.
func WithACL(token string) Option {
	return func(a *Agent) {
		a.Token = token
		a.args = append(a.args, "-hcl", fmt.Sprintf(
			`acl { enabled = true default_policy = "deny" enable_token_persistence = false tokens { initial_management = %q agent = %q } }`, token, token))
	}
}

// Start starts a dev agent on free loopback ports and waits until it
// has a leader; it is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Agent {
	t.Helper()
	a := &Agent{t: t, bin: Binary(t), Ports: map[string]int{}}
	for _, name := range []string{"http", "dns", "serf_lan", "serf_wan", "server", "grpc", "grpc_tls"} {
		a.Ports[name] = freePort(t, a.Ports)
	}
	a.HTTPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Ports["http"]))
	a.args = []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", fmt.Sprintf("uvtest-%d-%d", os.Getpid(), seq.Add(1)), "-log-level", "warn",
		"-http-port", strconv.Itoa(a.Ports["http"]), "-dns-port", strconv.Itoa(a.Ports["dns"]),
		"-serf-lan-port", strconv.Itoa(a.Ports["serf_lan"]), "-serf-wan-port", strconv.Itoa(a.Ports["serf_wan"]),
		"-server-port", strconv.Itoa(a.Ports["server"]), "-grpc-port", strconv.Itoa(a.Ports["grpc"]),
		// -dev also listens for gRPC with TLS, on 8503 unless told otherwise.
		"-hcl", fmt.Sprintf("ports { grpc_tls = %d }", a.Ports["grpc_tls"]),
	}
	for _, o := range opts {
		o(a)
	}
	a.Start()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("consul agent output:\n%s", a.out.String())
		}
	})
	return a
}

// Start (re)starts the agent process on the same ports; a dev agent starts
// empty. It waits until the agent has a leader.
func (a *Agent) Start() {
	a.t.Helper()
	a.mu.Lock()
	if a.out == nil {
		a.out = &lockedBuffer{}
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = a.out, a.out
	if err := cmd.Start(); err != nil {
		a.mu.Unlock()
		a.t.Fatalf("start consul: %v", err)
	}
	a.cmd = cmd
	a.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if leader(c, a.HTTPAddr) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("consul agent on %s has no leader after 60s:\n%s", a.HTTPAddr, a.out.String())
}

func leader(c *http.Client, addr string) bool {
	resp, err := c.Get("http://" + addr + "/v1/status/leader")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Trim(strings.TrimSpace(b.String()), `"`) != ""
}

// Stop stops the agent (SIGTERM, then SIGKILL after 10s).
func (a *Agent) Stop() {
	a.mu.Lock()
	cmd := a.cmd
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Client returns an API client of the agent with the given ACL token.
func (a *Agent) Client(t testing.TB, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.HTTPAddr, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Output returns what the agent printed.
func (a *Agent) Output() string { return a.out.String() }

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freePort returns a loopback port free for both TCP and UDP (serf and
// DNS use both) and not among taken.
func freePort(t testing.TB, taken map[string]int) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		dup := false
		for _, p := range taken {
			dup = dup || p == port
		}
		if !dup {
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
