package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/unitvisor/unitvisor/drivers/qemu"
)

// nodeStatus prints the agent's view of this machine: systemd, drivers and
// what fingerprinting found.
func nodeStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: unitvisor node status [-json]")
		return exitInvalid
	}
	var info struct {
		Version        string                `json:"version"`
		SystemdVersion int                   `json:"systemd_version"`
		UnitPrefix     string                `json:"unit_prefix"`
		Slice          string                `json:"slice"`
		DataDir        string                `json:"data_dir"`
		Drivers        map[string]driverInfo `json:"drivers"`
	}
	var raw json.RawMessage
	if err := newClient(*socket).do("GET", "/v1/agent", nil, &raw); err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitCode(err)
	}
	if *asJSON {
		stdout.Write(raw)
		return exitOK
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		fmt.Fprintln(stderr, "unitvisor: agent answer:", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "agent %s, systemd %d, units %s-* in %s, data in %s\n", info.Version, info.SystemdVersion, info.UnitPrefix, info.Slice, info.DataDir)
	for _, name := range []string{"exec", "raw_exec", "java", "qemu", "docker"} {
		d, ok := info.Drivers[name]
		if !ok {
			continue
		}
		line := "disabled"
		if d.Enabled {
			line = "enabled"
		}
		switch {
		case d.Problem != "":
			line += ", not usable: " + d.Problem
		case d.Fingerprint != nil:
			fp, _ := json.Marshal(d.Fingerprint)
			line += " " + string(fp)
		}
		fmt.Fprintf(stdout, "  driver %-8s %s\n", name, line)
	}
	return exitOK
}

// qemuPowerdown is the ExecStop of qemu tasks with graceful_shutdown: it
// asks the VM to power down over QMP and waits up to -timeout for it.
func qemuPowerdown(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qemu-powerdown", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the VM to shut down")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: unitvisor qemu-powerdown [-timeout D] QMP_SOCKET")
		return exitInvalid
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := qemu.Powerdown(ctx, fs.Arg(0), *timeout, stdout); err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitFailure
	}
	return exitOK
}
