package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and returns either a job or a
// non-empty Diagnostics, never both nor neither, and that returned jobs obey
// the validation rules.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.*", "testdata/invalid/*.*"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, ".golden") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(filepath.Ext(file) == ".json", src)
		}
	}
	for _, tt := range validTests {
		f.Add(filepath.Ext(tt.filename) == ".json", []byte(tt.src))
	}
	f.Fuzz(func(t *testing.T, isJSON bool, src []byte) {
		filename := "fuzz.hcl"
		if isJSON {
			filename = "fuzz.json"
		}
		job, err := Parse(filename, src)
		switch {
		case job == nil && err == nil:
			t.Fatal("Parse returned neither a job nor an error")
		case job != nil && err != nil:
			t.Fatalf("Parse returned both a job and an error: %v", err)
		case err != nil:
			checkDiagnostics(t, err)
		default:
			checkJob(t, job)
		}
	})
}

func checkDiagnostics(t *testing.T, err error) {
	var diags Diagnostics
	if !errors.As(err, &diags) || len(diags) == 0 {
		t.Fatalf("error %q (%T) is not a non-empty Diagnostics", err, err)
	}
	if got := len(strings.Split(err.Error(), "\n")); got != len(diags) {
		t.Fatalf("Error() has %d lines for %d diagnostics:\n%s", got, len(diags), err)
	}
}

func checkJob(t *testing.T, job *Job) {
	if checkName("job", job.Name) != nil || len(job.Tasks) == 0 {
		t.Fatalf("invalid job accepted: name %q, %d tasks", job.Name, len(job.Tasks))
	}
	for _, task := range job.Tasks {
		r := task.Restart
		switch {
		case checkName("task", task.Name) != nil,
			driverConfigFields[task.Driver] == nil,
			task.Count < 1 || task.Count > maxCount,
			!strings.HasPrefix(task.Config.Command, "/") && !strings.HasPrefix(task.Config.Command, "${"+VarTaskDir+"}"),
			task.User != "" && checkUser(task.User) != nil,
			r.Attempts < 0 || r.Interval <= 0 || r.Delay < 0,
			r.Mode != RestartModeFail && r.Mode != RestartModeDelay,
			!slices.Contains(linuxSignals, strings.TrimPrefix(task.KillSignal, "SIG")),
			task.KillTimeout <= 0 || task.KillTimeout > maxKillTimeout:
			t.Fatalf("invalid task accepted: %+v", task)
		}
		for key := range task.Env {
			if checkEnvKey(key) != nil {
				t.Fatalf("invalid env key %q accepted", key)
			}
		}
		for _, p := range task.Ports {
			if checkPortLabel(p.Label) != nil || p.Static < 0 || p.Static > maxPort {
				t.Fatalf("invalid port accepted: %+v", p)
			}
		}
		for _, s := range task.Services {
			if checkServiceName(s.Name) != nil || len(s.Checks) == 0 {
				t.Fatalf("invalid service accepted: %+v", s)
			}
			for _, c := range s.Checks {
				if _, ok := checkTypeFields[c.Type]; !ok || c.Type != CheckTTL && c.Interval < minCheckInterval {
					t.Fatalf("invalid check accepted: %+v", c)
				}
			}
		}
	}
}
