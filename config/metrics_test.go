package config

import (
	"strings"
	"testing"
	"time"
)

func TestMetricsConfig(t *testing.T) {
	d := Default()
	if d.Metrics.Address != "127.0.0.1:17100" || d.Metrics.Usage() != 10*time.Second {
		t.Fatalf("defaults: %+v", d.Metrics)
	}
	a, err := Parse("agent.hcl", []byte(`
metrics {
  address        = "0.0.0.0:9999"
  usage_interval = "2s"
}
`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Metrics.Address != "0.0.0.0:9999" || a.Metrics.Usage() != 2*time.Second {
		t.Fatalf("got %+v", a.Metrics)
	}
	a, err = Parse("agent.hcl", []byte("metrics {\n  usage_interval = \"30s\"\n}\n"))
	if err != nil || a.Metrics.Address != DefaultMetricsAddress {
		t.Fatalf("address default with a metrics block: %v %+v", err, a.Metrics)
	}
	for _, tc := range []struct{ src, want string }{
		{"metrics {\n  address = \"17100\"\n}", "want host:port"},
		{"metrics {\n  address = \"127.0.0.1:http\"\n}", "from 0 to 65535"},
		{"metrics {\n  address = \"127.0.0.1:70000\"\n}", "from 0 to 65535"},
		{"metrics {\n  usage_interval = \"100ms\"\n}", "at least 1s"},
		{"metrics {\n  usage_interval = \"often\"\n}", "usage_interval"},
	} {
		_, err := Parse("agent.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}
}
