package config

import (
	"fmt"
	"time"
)

// Consul is the local Consul agent that services and health checks go to.
// Without a consul block the Consul bridge is off.
type Consul struct {
	// Address is host:port or a URL (http://, https://, unix://); without
	// a scheme, https is used when ca_file or cert_file is set.
	Address string `hcl:"address,optional"`
	// Token is an ACL token with service:write on the services of the jobs
	// (and node:read); TokenFile is a file holding one. Set one of them.
	Token     string `hcl:"token,optional"`
	TokenFile string `hcl:"token_file,optional"`
	// TLS to the agent.
	CAFile             string `hcl:"ca_file,optional"`
	CertFile           string `hcl:"cert_file,optional"`
	KeyFile            string `hcl:"key_file,optional"`
	InsecureSkipVerify bool   `hcl:"insecure_skip_verify,optional"`
	// SyncInterval is the period of the anti-entropy pass (a full diff
	// against the agent's services and checks).
	SyncInterval string `hcl:"sync_interval,optional"`
}

// Consul defaults.
const (
	DefaultConsulAddress = "127.0.0.1:8500"
	DefaultSyncInterval  = "30s"
)

// Sync returns SyncInterval as a duration.
func (c *Consul) Sync() time.Duration {
	d, _ := time.ParseDuration(c.SyncInterval)
	return d
}

func (c *Consul) fill() {
	if c.Address == "" {
		c.Address = DefaultConsulAddress
	}
	if c.SyncInterval == "" {
		c.SyncInterval = DefaultSyncInterval
	}
}

// problems lists what is wrong with the consul block (none without one).
func (c *Consul) problems() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Token != "" && c.TokenFile != "" {
		out = append(out, "consul: set token or token_file, not both")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		out = append(out, "consul: cert_file and key_file go together: set both or neither")
	}
	if d, err := time.ParseDuration(c.SyncInterval); err != nil || d < time.Second {
		out = append(out, fmt.Sprintf("consul sync_interval %q: want a duration of at least 1s, e.g. %q", c.SyncInterval, DefaultSyncInterval))
	}
	return out
}
