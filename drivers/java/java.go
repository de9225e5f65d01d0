// Package java is the "java" driver: a jar (java -jar) or a main class
// with a class path, run with the same isolation as exec. Fingerprinting
// finds the JVM and its version.
package java

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// Info is what fingerprinting found.
type Info struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

var versionRE = regexp.MustCompile(`version "([^"]+)"`)

// Fingerprint finds java on PATH and asks it for its version.
func Fingerprint(ctx context.Context) (Info, error) {
	path, err := exec.LookPath("java")
	if err != nil {
		return Info{}, fmt.Errorf("java is not installed on this machine (no java on PATH)")
	}
	return probe(ctx, path)
}

func probe(ctx context.Context, path string) (Info, error) {
	out, err := exec.CommandContext(ctx, path, "-version").CombinedOutput()
	if err != nil {
		return Info{}, fmt.Errorf("%s -version: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return Info{}, fmt.Errorf("%s -version: no version in %q", path, out)
	}
	return Info{Path: path, Version: string(m[1])}, nil
}

// Driver is the java driver; JVM is the fingerprinted default JVM (nil
// when none was found: tasks without java_home are then refused).
type Driver struct {
	JVM *Info
}

// Name is the driver name used in job files.
func (Driver) Name() string { return "java" }

// Check refuses, at submit, a task this machine cannot run: no JVM, or a
// jar or java_home that does not exist. It names the offending field.
func (d Driver) Check(t *jobspec.Task) (string, error) {
	c := t.Config
	if c.JavaHome != "" {
		if _, err := os.Stat(filepath.Join(c.JavaHome, "bin", "java")); err != nil {
			return "config.java_home", fmt.Errorf("java_home %s has no bin/java: point it at a JDK or JRE", c.JavaHome)
		}
	} else if d.JVM == nil {
		return "", fmt.Errorf("java is not installed on this machine: install a JRE (e.g. apt-get install default-jre-headless) or set java_home")
	}
	if c.JarPath != "" && !strings.Contains(c.JarPath, "${") {
		if _, err := os.Stat(c.JarPath); err != nil {
			return "config.jar_path", fmt.Errorf("jar %s: %w", c.JarPath, err)
		}
	}
	return "", nil
}

// Prepare builds the java command line and the unit spec.
func (d Driver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	java := ""
	if d.JVM != nil {
		java = d.JVM.Path
	}
	if h := in.Task.Config.JavaHome; h != "" {
		java = filepath.Join(in.Interpolate(h), "bin", "java")
	}
	if java == "" {
		return units.Spec{}, fmt.Errorf("java is not installed on this machine")
	}
	props, err := drivers.PrepareIsolated(in)
	if err != nil {
		return units.Spec{}, err
	}
	cmd, err := drivers.Command(in, Argv(java, in))
	if err != nil {
		return units.Spec{}, err
	}
	props = append(props, cmd)
	return units.Spec{Name: in.Unit, Properties: props}, nil
}

// Argv is the JVM command line: options, a heap limit derived from the
// task's memory when the options set none, then the jar or class, then
// the program's args.
func Argv(java string, in drivers.Instance) []string {
	c := in.Task.Config
	argv := []string{java}
	for _, o := range c.JVMOptions {
		argv = append(argv, in.Interpolate(o))
	}
	if xmx := HeapOption(in.Task); xmx != "" && !hasHeapOption(c.JVMOptions) {
		argv = append(argv, xmx)
	}
	if c.JarPath != "" {
		argv = append(argv, "-jar", in.Interpolate(c.JarPath))
	} else {
		if c.ClassPath != "" {
			argv = append(argv, "-cp", in.Interpolate(c.ClassPath))
		}
		argv = append(argv, c.Class)
	}
	for _, a := range c.Args {
		argv = append(argv, in.Interpolate(a))
	}
	return argv
}

// HeapOption derives -Xmx from the task's memory limit: three quarters of
// it, leaving a quarter for the JVM's own (metaspace, threads, code cache,
// direct buffers), with at least 16 MiB of heap. No memory limit, no -Xmx.
func HeapOption(t *jobspec.Task) string {
	if t.Resources == nil || t.Resources.MemoryLimitMB() == 0 {
		return ""
	}
	return fmt.Sprintf("-Xmx%dm", max(t.Resources.MemoryLimitMB()*3/4, 16))
}

func hasHeapOption(opts []string) bool {
	for _, o := range opts {
		if strings.HasPrefix(o, "-Xmx") || strings.HasPrefix(o, "-XX:MaxHeapSize") || strings.HasPrefix(o, "-XX:MaxRAM") {
			return true
		}
	}
	return false
}
