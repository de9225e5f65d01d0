package jobspec

import (
	"slices"
	"strconv"
	"strings"
)

// Names of the variables unitvisor expands in config.command, config.args
// and env values, and sets in the environment of every task process.
const (
	VarPrefix     = "UNITVISOR_"         // reserved prefix of all unitvisor variables
	VarJob        = "UNITVISOR_JOB"      // job name
	VarTask       = "UNITVISOR_TASK"     // task name
	VarIndex      = "UNITVISOR_INDEX"    // instance index, 0 to count-1
	VarTaskDir    = "UNITVISOR_TASK_DIR" // the instance's working directory
	VarUnit       = "UNITVISOR_UNIT"     // the instance's systemd unit name
	VarPortPrefix = "UNITVISOR_PORT_"    // followed by a port label: the port number
)

// taskVars returns the variable names a task may reference: the fixed ones
// and one UNITVISOR_PORT_<label> per port of the task.
func taskVars(ports []Port) []string {
	names := []string{VarJob, VarTask, VarIndex, VarTaskDir, VarUnit}
	for _, p := range ports {
		names = append(names, VarPortPrefix+p.Label)
	}
	return names
}

// VarsFor returns the UNITVISOR_* variables of instance index of task:
// UNITVISOR_JOB, _TASK, _INDEX, _TASK_DIR, _UNIT and UNITVISOR_PORT_<label>
// for each port of the task. ports maps port labels to the ports assigned
// to the instance; a static port missing from ports gets its Static value,
// a dynamic one missing from ports gets no variable.
func VarsFor(job *Job, task *Task, index int, taskDir, unit string, ports map[string]int) map[string]string {
	vars := map[string]string{
		VarJob:     job.Name,
		VarTask:    task.Name,
		VarIndex:   strconv.Itoa(index),
		VarTaskDir: taskDir,
		VarUnit:    unit,
	}
	for _, p := range task.Ports {
		port, ok := ports[p.Label]
		if !ok {
			port = p.Static
		}
		if port > 0 {
			vars[VarPortPrefix+p.Label] = strconv.Itoa(port)
		}
	}
	return vars
}

// Interpolate replaces every "${NAME}" in s whose NAME is a key of vars by
// its value, in a single pass (values are not expanded again). All other
// text is kept as is, including "${PATH}", "$HOME" and a "$" before a
// replaced reference: "$${" is not an escape here, because HCL already
// turned "$${" in the job file into a literal "${".
func Interpolate(s string, vars map[string]string) string {
	var b strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			break
		}
		length := strings.IndexByte(s[start+2:], '}')
		if length < 0 {
			break
		}
		if value, ok := vars[s[start+2:start+2+length]]; ok {
			b.WriteString(s[:start])
			b.WriteString(value)
			s = s[start+2+length+1:]
			continue
		}
		// Not a known variable: keep the "$" and look again after it.
		b.WriteString(s[:start+1])
		s = s[start+1:]
	}
	b.WriteString(s)
	return b.String()
}

// References returns the names NAME of the "${NAME}" references in s whose
// NAME is an identifier ([A-Za-z_][A-Za-z0-9_]*), without duplicates, in
// order of first appearance.
func References(s string) []string {
	var names []string
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			return names
		}
		s = s[start+2:]
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return names
		}
		if name := s[:end]; envKeyRE.MatchString(name) && !slices.Contains(names, name) {
			names = append(names, name)
			s = s[end+1:]
		}
	}
}
