package jobspec

import (
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/invalid")

// defaults returns a task with the given name, driver and command and all
// other fields at their defaults.
func defaults(name, driver, command string) *Task {
	return &Task{
		Name:   name,
		Driver: driver,
		Count:  1,
		Config: Config{Command: command},
		Restart: RestartPolicy{
			Attempts: 2,
			Interval: 30 * time.Minute,
			Delay:    15 * time.Second,
			Mode:     RestartModeFail,
		},
		KillSignal:  "SIGTERM",
		KillTimeout: 5 * time.Second,
	}
}

// with returns t after applying change to it.
func with(t *Task, change func(*Task)) *Task {
	change(t)
	return t
}

// validTests are valid job files and the jobs they parse to; FuzzParse
// uses them as seeds too.
var validTests = []struct {
	name     string
	filename string
	src      string
	want     *Job
}{
	{
		name:     "resources",
		filename: "res.hcl",
		src: `job "web" {
				task "api" {
					driver = "exec"
					config { command = "/bin/true" }
					resources {
						cpu        = 200
						cpu_limit  = "150%"
						cpuset     = "0-1,3"
						memory     = 64
						memory_max = 128
						swap       = 32
						pids       = 50
						io_weight  = 300
						devices    = ["/dev/fuse", "/dev/net/tun  rw"]
					}
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{func() *Task {
			t := defaults("api", "exec", "/bin/true")
			t.Resources = &Resources{CPU: 200, CPULimit: 150, CPUSet: "0-1,3", MemoryMB: 64, MemoryMaxMB: 128,
				SwapMB: 32, Pids: 50, IOWeight: 300, Devices: []string{"/dev/fuse", "/dev/net/tun rw"}}
			return t
		}()}},
	},
	{
		name:     "defaults",
		filename: "min.hcl",
		src: `job "web" {
				task "api" {
					driver = "exec"
					config { command = "/bin/true" }
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{defaults("api", "exec", "/bin/true")}},
	},
	{
		name:     "all fields",
		filename: "full.hcl",
		src: `job "web.v2" {
				task "api_1" {
					driver = "raw_exec"
					count  = 1000
					config {
						command = "${UNITVISOR_TASK_DIR}/bin/api"
						args    = ["--port=${UNITVISOR_PORT_http}", "--unit", "${UNITVISOR_UNIT}", 42, true]
					}
					env {
						A = "${UNITVISOR_JOB}-${UNITVISOR_TASK}-${UNITVISOR_INDEX}"
						_b = 1
					}
					port "http" {}
					port "metrics" {}
					user = "www-data"
					restart {
						attempts = 0
						interval = "1m30s"
						delay    = "0s"
						mode     = "delay"
					}
					kill_signal  = "int"
					kill_timeout = "1h"
				}
			}`,
		want: &Job{Name: "web.v2", Tasks: []*Task{{
			Name:   "api_1",
			Driver: "raw_exec",
			Count:  1000,
			Config: Config{
				Command: "${UNITVISOR_TASK_DIR}/bin/api",
				Args:    []string{"--port=${UNITVISOR_PORT_http}", "--unit", "${UNITVISOR_UNIT}", "42", "true"},
			},
			Env: map[string]string{
				"A":  "${UNITVISOR_JOB}-${UNITVISOR_TASK}-${UNITVISOR_INDEX}",
				"_b": "1",
			},
			Ports: []Port{{Label: "http"}, {Label: "metrics"}},
			User:  "www-data",
			Restart: RestartPolicy{
				Attempts: 0,
				Interval: 90 * time.Second,
				Delay:    0,
				Mode:     RestartModeDelay,
			},
			KillSignal:  "SIGINT",
			KillTimeout: time.Hour,
		}}},
	},
	{
		name:     "partial restart keeps other defaults",
		filename: "restart.hcl",
		src: `job "web" {
				task "api" {
					driver = "exec"
					config { command = "/bin/true" }
					restart { attempts = 5 }
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{with(defaults("api", "exec", "/bin/true"), func(t *Task) {
			t.Restart.Attempts = 5
		})}},
	},
	{
		name:     "signal spellings and numeric uid",
		filename: "signals.hcl",
		src: `job "web" {
				task "a" {
					driver = "exec"
					config { command = "/bin/true" }
					kill_signal = "SIGhup"
					user = 1000
				}
				task "b" {
					driver = "exec"
					config { command = "/bin/true" }
					kill_signal = "KILL"
					user = "_apt"
				}
				task "c" {
					driver = "exec"
					config { command = "/bin/true" }
					kill_signal = "sigwinch"
					user = "machine$"
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{
			with(defaults("a", "exec", "/bin/true"), func(t *Task) { t.KillSignal, t.User = "SIGHUP", "1000" }),
			with(defaults("b", "exec", "/bin/true"), func(t *Task) { t.KillSignal, t.User = "SIGKILL", "_apt" }),
			with(defaults("c", "exec", "/bin/true"), func(t *Task) { t.KillSignal, t.User = "SIGWINCH", "machine$" }),
		}},
	},
	{
		name:     "literal text and non-unitvisor references pass through",
		filename: "literal.hcl",
		src: `job "web" {
				task "api" {
					driver = "exec"
					config {
						command = "/bin/sh"
						args    = ["-c", "echo $HOME ${PATH} $${PATH} $${a.b} $${UNITVISOR_NOPE} %%{x}"]
					}
					env { P = "${PATH}:/opt/bin" }
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{with(defaults("api", "exec", "/bin/sh"), func(t *Task) {
			t.Config.Args = []string{"-c", "echo $HOME ${PATH} ${PATH} ${a.b} ${UNITVISOR_NOPE} %{x}"}
			t.Env = map[string]string{"P": "${PATH}:/opt/bin"}
		})}},
	},
	{
		name:     "static ports in several tasks",
		filename: "ports.hcl",
		src: `job "web" {
				task "a" {
					driver = "exec"
					config { command = "/bin/true" }
					port "http" { static = 8080 }
					port "any" {}
				}
				task "b" {
					driver = "exec"
					count  = 3
					config { command = "/bin/true" }
					port "http" {}
					port "other" {}
				}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{
			with(defaults("a", "exec", "/bin/true"), func(t *Task) {
				t.Ports = []Port{{Label: "http", Static: 8080}, {Label: "any"}}
			}),
			with(defaults("b", "exec", "/bin/true"), func(t *Task) {
				t.Count = 3
				t.Ports = []Port{{Label: "http"}, {Label: "other"}}
			}),
		}},
	},
	{
		name:     "json with task array, comments and empty args",
		filename: "web.json",
		src: `{
				"//": "comment",
				"job": {"web": {
					"task": [
						{"a": {"driver": "exec", "config": {"command": "/bin/true", "args": []}}},
						{"b": {"//": "comment", "driver": "raw_exec", "config": {"command": "/bin/echo", "args": ["$HOME", "${PATH}", "$${UNITVISOR_X}"]}}}
					]
				}}
			}`,
		want: &Job{Name: "web", Tasks: []*Task{
			defaults("a", "exec", "/bin/true"),
			with(defaults("b", "raw_exec", "/bin/echo"), func(t *Task) {
				t.Config.Args = []string{"$HOME", "${PATH}", "${UNITVISOR_X}"}
			}),
		}},
	},
}

// withoutPos clears the source positions, which differ between files.
func withoutPos(j *Job) *Job {
	for _, t := range j.Tasks {
		t.Pos = nil
	}
	return j
}

func TestPositionsForAgentChecks(t *testing.T) {
	job, err := Parse("p.hcl", []byte(`job "j" {
  task "t" {
    driver = "exec"
    config { command = "/bin/true" }
    resources {
      memory = 64
    }
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	task := job.Tasks[0]
	for path, want := range map[string]string{"": "p.hcl:2:3", "driver": "p.hcl:3:14", "resources.memory": "p.hcl:6:16", "resources.nope": "p.hcl:2:3"} {
		if got := task.At(path); got != want {
			t.Errorf("At(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestParseValid(t *testing.T) {
	for _, tt := range validTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.filename, []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: unexpected error:\n%v", err)
			}
			if !reflect.DeepEqual(withoutPos(got), tt.want) {
				t.Errorf("Parse:\n got %s\nwant %s", toJSON(t, got), toJSON(t, tt.want))
			}
		})
	}
}

func TestParseExample(t *testing.T) {
	want := &Job{Name: "web", Tasks: []*Task{{
		Name:   "api",
		Driver: "exec",
		Count:  2,
		Config: Config{
			Command: "/usr/bin/python3",
			Args:    []string{"-m", "http.server", "${UNITVISOR_PORT_http}"},
		},
		Env:         map[string]string{"GREETING": "hello from ${UNITVISOR_TASK}"},
		Ports:       []Port{{Label: "http"}},
		User:        "nobody",
		Restart:     RestartPolicy{Attempts: 3, Interval: 5 * time.Minute, Delay: 5 * time.Second, Mode: RestartModeFail},
		KillSignal:  "SIGTERM",
		KillTimeout: 10 * time.Second,
	}}}
	for _, file := range []string{"testdata/example.hcl", "testdata/example.json"} {
		got, err := ParseFile(file)
		if err != nil {
			t.Fatalf("ParseFile(%s): %v", file, err)
		}
		if !reflect.DeepEqual(withoutPos(got), want) {
			t.Errorf("ParseFile(%s):\n got %s\nwant %s", file, toJSON(t, got), toJSON(t, want))
		}
	}
}

// TestJSONEquivalence checks that the example parses to the same Job in
// both syntaxes.
func TestJSONEquivalence(t *testing.T) {
	fromHCL, err := ParseFile("testdata/example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := ParseFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutPos(fromHCL), withoutPos(fromJSON)) {
		t.Errorf("HCL and JSON differ:\nHCL  %s\nJSON %s", toJSON(t, fromHCL), toJSON(t, fromJSON))
	}
}

// TestParseInvalid compares the diagnostics of each file in
// testdata/invalid with its .golden file; go test -update rewrites them.
func TestParseInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.*")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, ".golden") {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			job, err := Parse(filepath.Base(file), src)
			if job != nil {
				t.Errorf("Parse returned a job for an invalid file")
			}
			var diags Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("Parse error %v (%T) is not Diagnostics", err, err)
			}
			got := err.Error() + "\n"
			golden := file + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestAllErrorsReported checks that problems in different tasks are all
// reported by one Parse call.
func TestAllErrorsReported(t *testing.T) {
	_, err := ParseFile("testdata/invalid/multi.hcl")
	var diags Diagnostics
	if !errors.As(err, &diags) {
		t.Fatalf("error %v is not Diagnostics", err)
	}
	lines := map[int]bool{}
	for _, d := range diags {
		lines[d.Line] = true
	}
	for _, line := range []int{6, 8, 12, 14, 16, 23, 26, 29} { // tasks api, worker and db
		if !lines[line] {
			t.Errorf("no diagnostic on line %d; got:\n%v", line, err)
		}
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile("testdata/does-not-exist.hcl")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ParseFile of a missing file: got %v, want an fs.ErrNotExist error", err)
	}
}

func TestDiagnosticString(t *testing.T) {
	tests := []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{File: "web.hcl", Line: 3, Column: 5, Summary: "Bad", Detail: "fix it"}, "web.hcl:3:5: Bad: fix it"},
		{Diagnostic{File: "web.hcl", Summary: "Bad"}, "web.hcl: Bad"},
		{Diagnostic{File: "a.hcl", Line: 1, Column: 1, Summary: "Bad", Detail: "two\n  lines"}, "a.hcl:1:1: Bad: two lines"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	ds := Diagnostics{tests[0].d, tests[1].d}
	if got, want := ds.Error(), "web.hcl:3:5: Bad: fix it\nweb.hcl: Bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"comand", "command", 1},
		{"SIGTREM", "SIGTERM", 1}, // adjacent swap
		{"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
