package java

import (
	"slices"
	"testing"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
)

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  jobspec.Config
		res  *jobspec.Resources
		want []string
	}{
		{"jar with derived heap", jobspec.Config{JarPath: "/opt/a.jar", JVMOptions: []string{"-Dx=${UNITVISOR_TASK}"}, Args: []string{"a"}},
			&jobspec.Resources{MemoryMB: 256},
			[]string{"/usr/bin/java", "-Dx=t", "-Xmx192m", "-jar", "/opt/a.jar", "a"}},
		{"memory_max is the limit", jobspec.Config{JarPath: "/opt/a.jar"},
			&jobspec.Resources{MemoryMB: 64, MemoryMaxMB: 1024},
			[]string{"/usr/bin/java", "-Xmx768m", "-jar", "/opt/a.jar"}},
		{"own -Xmx wins", jobspec.Config{Class: "a.Main", ClassPath: "/opt/lib:/opt/x.jar", JVMOptions: []string{"-Xmx1g"}},
			&jobspec.Resources{MemoryMB: 256},
			[]string{"/usr/bin/java", "-Xmx1g", "-cp", "/opt/lib:/opt/x.jar", "a.Main"}},
		{"no memory, no heap option", jobspec.Config{Class: "Main"}, nil,
			[]string{"/usr/bin/java", "Main"}},
		{"tiny memory keeps 16m", jobspec.Config{Class: "Main"}, &jobspec.Resources{MemoryMB: 16},
			[]string{"/usr/bin/java", "-Xmx16m", "Main"}},
	} {
		task := &jobspec.Task{Name: "t", Config: tc.cfg, Resources: tc.res}
		in := drivers.Instance{Task: task, Vars: map[string]string{"UNITVISOR_TASK": "t"}}
		if got := Argv("/usr/bin/java", in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	none := Driver{}
	if _, err := none.Check(&jobspec.Task{Config: jobspec.Config{Class: "Main"}}); err == nil {
		t.Fatal("no JVM: want an error")
	}
	d := Driver{JVM: &Info{Path: "/usr/bin/java"}}
	if field, err := d.Check(&jobspec.Task{Config: jobspec.Config{JarPath: "/no/such.jar"}}); err == nil || field != "config.jar_path" {
		t.Fatalf("missing jar: %q %v", field, err)
	}
	if field, err := d.Check(&jobspec.Task{Config: jobspec.Config{Class: "M", JavaHome: "/no/jdk"}}); err == nil || field != "config.java_home" {
		t.Fatalf("bad java_home: %q %v", field, err)
	}
}
