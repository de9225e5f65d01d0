// Command unitvisor is the agent (`unitvisor agent`) and its client verbs
// (`job run`, `job stop`, `job status`, `logs`, `validate`, `version`).
// It only parses flags and wires packages together.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitInvalid = 2
)

const usage = `usage: unitvisor <command> [flags]

commands:
  agent [-config FILE]            run the agent
  job run [-detach] FILE          submit a job and wait until its tasks run
  job stop [-purge] NAME          stop a job's tasks (each within its kill_timeout)
  job status [-json] [NAME]       show jobs and their task instances
  logs [-f] [-n N] JOB [TASK]     show task output from the journal
  node status [-json]             show this machine's drivers and what fingerprinting found
  validate FILE                   check a job file; exit 2 if it is invalid
  qemu-powerdown [-timeout D] SOCK  (internal) ExecStop of qemu tasks: QMP system_powerdown
  exec-task FILE                  (internal) exec the command line in FILE (for tasks whose
                                  arguments systemd 252 cannot keep across daemon-reload)
  docker-prestart, docker-run, docker-poststop, docker-overlay-probe
                                  (internal) the units of docker tasks; overlay probe
  version                         print the version

Client commands reach the agent through -socket (default $UNITVISOR_SOCKET or
/run/unitvisor/unitvisor.sock). Exit codes: 0 ok, 1 failure, 2 invalid input.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitInvalid
	}
	switch args[0] {
	case "agent":
		return runAgent(args[1:], stderr)
	case "job":
		if len(args) < 2 {
			fmt.Fprint(stderr, usage)
			return exitInvalid
		}
		switch args[1] {
		case "run":
			return jobRun(args[2:], stdout, stderr)
		case "stop":
			return jobStop(args[2:], stdout, stderr)
		case "status":
			return jobStatus(args[2:], stdout, stderr)
		}
	case "logs":
		return logs(args[1:], stdout, stderr)
	case "node":
		if len(args) >= 2 && args[1] == "status" {
			return nodeStatus(args[2:], stdout, stderr)
		}
	case "exec-task":
		return execTask(args[1:], stderr)
	case "qemu-powerdown":
		return qemuPowerdown(args[1:], stdout, stderr)
	case "docker-prestart", "docker-run", "docker-poststop", "docker-overlay-probe":
		return dockerHelper(args[0], args[1:], stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "unitvisor", version)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "unitvisor: unknown command %q\n\n%s", args[0], usage)
	return exitInvalid
}
