package config

import (
	"strings"
	"testing"
	"time"
)

func TestConsulBlock(t *testing.T) {
	a, err := Parse("agent.hcl", []byte(`consul {
  token_file = "/etc/unitvisor/consul.token"
  ca_file    = "/etc/consul/ca.pem"
}`))
	if err != nil {
		t.Fatal(err)
	}
	c := a.Consul
	if c == nil || c.Address != DefaultConsulAddress || c.Sync() != 30*time.Second || c.TokenFile == "" || c.CAFile == "" {
		t.Fatalf("consul block: %+v", c)
	}
	if d := Default(); d.Consul != nil {
		t.Fatalf("no consul block: the bridge must be off, got %+v", d.Consul)
	}
	for _, tc := range []struct{ src, want string }{
		{`consul {
  token      = "a"
  token_file = "/f"
}`, "token or token_file"},
		{`consul { sync_interval = "10ms" }`, "sync_interval"},
		{`consul { cert_file = "/c.pem" }`, "cert_file and key_file"},
		{`consul { adress = "x" }`, "Unsupported argument"},
	} {
		_, err := Parse("agent.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}
}
