package config

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	a, err := Parse("agent.hcl", []byte(`
data_dir = "/srv/uv"
ports { 
  min = 30000
  max = 30010
}
driver "raw_exec" { enabled = true }
driver "exec" { enabled = false }
`))
	if err != nil {
		t.Fatal(err)
	}
	if a.DataDir != "/srv/uv" || a.Socket != DefaultSocket || a.Ports.Min != 30000 || a.Ports.Max != 30010 {
		t.Fatalf("got %+v", a)
	}
	if !a.DriverEnabled("raw_exec") || a.DriverEnabled("exec") {
		t.Fatal("driver switches not applied")
	}
	if d := Default(); !d.DriverEnabled("exec") || d.DriverEnabled("raw_exec") {
		t.Fatal("defaults: exec on, raw_exec off")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`data_dir = "rel"`, "absolute path"},
		{`log_level = "loud"`, "log_level"},
		{`driver "docker2" { enabled = true }`, "unknown"},
		{`ports { 
  min = 9
  max = 8
}`, "ports 9-8"},
		{`bogus = 1`, "Unsupported argument"},
	} {
		_, err := Parse("agent.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}
}
