package units

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	n, err := NewNamer("uv")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job, task string
		index     int
		want      string
	}{
		{"web", "api", 0, "uv-web-api@0.service"},
		{"web-front", "api", 3, `uv-web\x2dfront-api@3.service`},
		{"web", "front-api", 1, `uv-web-front\x2dapi@1.service`},
		{"a.b", "c_d", 12, "uv-a.b-c_d@12.service"},
	} {
		got, err := n.Name(tc.job, tc.task, tc.index)
		if err != nil || got != tc.want {
			t.Errorf("Name(%q,%q,%d) = %q, %v; want %q", tc.job, tc.task, tc.index, got, err, tc.want)
			continue
		}
		j, task, i, err := n.Parse(got)
		if err != nil || j != tc.job || task != tc.task || i != tc.index {
			t.Errorf("Parse(%q) = %q %q %d %v", got, j, task, i, err)
		}
	}
}

func TestNamesInjective(t *testing.T) {
	n := Namer{Prefix: "uv"}
	a, _ := n.Name("a-b", "c", 0)
	b, _ := n.Name("a", "b-c", 0)
	if a == b {
		t.Fatalf("job a-b/task c and job a/task b-c share the unit name %s", a)
	}
}

func TestNameTooLong(t *testing.T) {
	n := Namer{Prefix: "uv"}
	if _, err := n.Name(strings.Repeat("-", 63), strings.Repeat("-", 63), 999); err == nil || !strings.Contains(err.Error(), "shorter names") {
		t.Fatalf("want a too-long error, got %v", err)
	}
}

func TestParseRejectsForeign(t *testing.T) {
	n := Namer{Prefix: "uv"}
	for _, u := range []string{"ssh.service", "uv-web@0.service", "uv-web-api.service", "uv-web-api@x.service",
		"uv-web-api@01.service", "uvx-web-api@0.service", "uv-web-api@0.scope", `uv-w\xZZ-api@0.service`} {
		if n.Owns(u) {
			t.Errorf("Owns(%q) = true", u)
		}
	}
	if _, err := NewNamer("UV-1"); err == nil {
		t.Error("prefix with upper case and dash accepted")
	}
}

func TestUnitFromPath(t *testing.T) {
	got, ok := unitFromPath("/org/freedesktop/systemd1/unit/uv_2dweb_2dapi_400_2eservice")
	if !ok || got != "uv-web-api@0.service" {
		t.Fatalf("got %q %v", got, ok)
	}
	if _, ok := unitFromPath("/org/freedesktop/systemd1/job/1"); ok {
		t.Fatal("job path accepted")
	}
}

func FuzzNameRoundTrip(f *testing.F) {
	f.Add("web", "api", 0)
	f.Add("a-b", "c.d", 7)
	f.Fuzz(func(t *testing.T, job, task string, index int) {
		if job == "" || task == "" || index < 0 {
			return
		}
		n := Namer{Prefix: "uv"}
		name, err := n.Name(job, task, index)
		if err != nil {
			return
		}
		j, tk, i, err := n.Parse(name)
		if err != nil || j != job || tk != task || i != index {
			t.Fatalf("round trip of %q %q %d via %q: %q %q %d %v", job, task, index, name, j, tk, i, err)
		}
	})
}
