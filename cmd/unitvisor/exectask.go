package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
)

// launcherPath is this binary's path, which task units run as `unitvisor
// exec-task FILE` when their command line cannot sit in a unit file.
func launcherPath(log *slog.Logger) string {
	self, err := os.Executable()
	if err != nil {
		log.Warn("own path unknown: command lines with ; or $ will not survive a daemon-reload", "err", err)
		return ""
	}
	return self
}

// exitExec is systemd's exit status for "could not execute" (203/EXEC), so
// a failed exec looks the same with or without the launcher.
const exitExec = 203

// execTask replaces this process with the command line stored in FILE
// (a JSON array: argv[0] is the program). It keeps the environment,
// credentials and cgroup systemd set up: the unit's main process becomes
// the task itself.
func execTask(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: unitvisor exec-task FILE")
		return exitInvalid
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "unitvisor exec-task:", err)
		return exitExec
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil || len(argv) == 0 {
		fmt.Fprintf(stderr, "unitvisor exec-task: %s: not a command line (%v)\n", args[0], err)
		return exitExec
	}
	err = syscall.Exec(argv[0], argv, os.Environ())
	fmt.Fprintf(stderr, "unitvisor exec-task: execute %s: %v\n", argv[0], err)
	return exitExec
}
