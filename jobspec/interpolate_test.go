package jobspec

import (
	"reflect"
	"testing"
)

func TestInterpolate(t *testing.T) {
	vars := map[string]string{
		"UNITVISOR_TASK":      "api",
		"UNITVISOR_INDEX":     "1",
		"UNITVISOR_PORT_http": "8080",
		"EMPTY":               "",
	}
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"no references", "no references"},
		{"$HOME", "$HOME"},
		{"${PATH}", "${PATH}"},
		{"${UNITVISOR_TASK}", "api"},
		{"hello from ${UNITVISOR_TASK}!", "hello from api!"},
		{"${UNITVISOR_TASK}${UNITVISOR_INDEX}", "api1"},
		{"${UNITVISOR_TASK}-${UNITVISOR_INDEX}:${UNITVISOR_PORT_http}", "api-1:8080"},
		{"a${EMPTY}b", "ab"},
		// "$${" is not an escape at this level (HCL already unescaped it).
		{"$${UNITVISOR_TASK}", "$api"},
		{"$${PATH}", "$${PATH}"},
		{"$$HOME", "$$HOME"},
		// Not references: unknown names, unterminated, empty, case.
		{"${unitvisor_task}", "${unitvisor_task}"},
		{"${UNITVISOR_TASK", "${UNITVISOR_TASK"},
		{"${}", "${}"},
		{"$", "$"},
		{"${", "${"},
		{"{UNITVISOR_TASK}", "{UNITVISOR_TASK}"},
		// A non-reference before a reference does not hide it.
		{"${${UNITVISOR_TASK}}", "${api}"},
		{"${PATH${UNITVISOR_TASK}", "${PATHapi"},
	}
	for _, tt := range tests {
		if got := Interpolate(tt.in, vars); got != tt.want {
			t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestInterpolateSinglePass(t *testing.T) {
	vars := map[string]string{"A": "${B}", "B": "b"}
	if got, want := Interpolate("${A}${B}", vars), "${B}b"; got != want {
		t.Errorf("Interpolate = %q, want %q (values must not be expanded again)", got, want)
	}
}

func TestReferences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"$HOME ${}", nil},
		{"${UNITVISOR_TASK}-${PATH}-${UNITVISOR_TASK}", []string{"UNITVISOR_TASK", "PATH"}},
		{"${a.b} ${1x} ${x", nil},
		{"${${A}}", []string{"A"}},
	}
	for _, tt := range tests {
		if got := References(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("References(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestVarsFor(t *testing.T) {
	job := &Job{Name: "web"}
	task := &Task{Name: "api", Ports: []Port{{Label: "http"}, {Label: "admin", Static: 9000}, {Label: "unassigned"}}}
	got := VarsFor(job, task, 2, "/var/lib/unitvisor/web/api/2", "uv-web-api-2.service", map[string]int{"http": 20001, "other": 1})
	want := map[string]string{
		"UNITVISOR_JOB":        "web",
		"UNITVISOR_TASK":       "api",
		"UNITVISOR_INDEX":      "2",
		"UNITVISOR_TASK_DIR":   "/var/lib/unitvisor/web/api/2",
		"UNITVISOR_UNIT":       "uv-web-api-2.service",
		"UNITVISOR_PORT_http":  "20001",
		"UNITVISOR_PORT_admin": "9000",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("VarsFor = %v, want %v", got, want)
	}
	args := Interpolate("--port=${UNITVISOR_PORT_http} --dir=${UNITVISOR_TASK_DIR} $HOME", got)
	if want := "--port=20001 --dir=/var/lib/unitvisor/web/api/2 $HOME"; args != want {
		t.Errorf("Interpolate with VarsFor = %q, want %q", args, want)
	}
}

// TestParsedReferencesExpand checks the whole path: references kept by Parse
// are exactly those VarsFor and Interpolate expand.
func TestParsedReferencesExpand(t *testing.T) {
	job, err := ParseFile("testdata/example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	task := job.Tasks[0]
	vars := VarsFor(job, task, 1, "/run/api/1", "api-1.service", map[string]int{"http": 31000})
	var args []string
	for _, a := range task.Config.Args {
		args = append(args, Interpolate(a, vars))
	}
	if want := []string{"-m", "http.server", "31000"}; !reflect.DeepEqual(args, want) {
		t.Errorf("args = %q, want %q", args, want)
	}
	if got, want := Interpolate(task.Env["GREETING"], vars), "hello from api"; got != want {
		t.Errorf("GREETING = %q, want %q", got, want)
	}
}
