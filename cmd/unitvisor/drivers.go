package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/drivers/exec"
	"github.com/unitvisor/unitvisor/drivers/java"
	"github.com/unitvisor/unitvisor/drivers/qemu"
	"github.com/unitvisor/unitvisor/drivers/rawexec"
	"github.com/unitvisor/unitvisor/supervisor"
)

// driverInfo is what `unitvisor node status` shows about one driver.
type driverInfo struct {
	Enabled     bool   `json:"enabled"`
	Detected    bool   `json:"detected"`
	Fingerprint any    `json:"fingerprint,omitempty"`
	Problem     string `json:"problem,omitempty"`
}

// buildDrivers fingerprints the machine and returns the enabled drivers
// and what was found, for the node's status.
func buildDrivers(ctx context.Context, cfg *config.Agent, log *slog.Logger) (map[string]supervisor.Driver, map[string]driverInfo) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	info := map[string]driverInfo{}
	all := []supervisor.Driver{exec.Driver{}, rawexec.Driver{}}
	info["exec"] = driverInfo{Detected: true}
	info["raw_exec"] = driverInfo{Detected: true}

	jd := java.Driver{}
	if jvm, err := java.Fingerprint(ctx); err != nil {
		info["java"] = driverInfo{Problem: err.Error()}
	} else {
		jd.JVM = &jvm
		info["java"] = driverInfo{Detected: true, Fingerprint: jvm}
	}
	all = append(all, jd)

	self, err := os.Executable()
	if err != nil {
		log.Warn("own path unknown: qemu graceful_shutdown disabled", "err", err)
	}
	qd := qemu.Driver{AllowedPaths: cfg.AllowedPaths("qemu")}
	if self != "" {
		qd.Stopper = func(timeout time.Duration) []string {
			return []string{self, "qemu-powerdown", "-timeout", timeout.String()}
		}
	}
	if q, err := qemu.Fingerprint(ctx); err != nil {
		info["qemu"] = driverInfo{Problem: err.Error()}
	} else {
		qd.Qemu = &q
		info["qemu"] = driverInfo{Detected: true, Fingerprint: q}
	}
	all = append(all, qd)
	all = append(all, dockerDriver(ctx, cfg, self, info, log))

	enabled := map[string]supervisor.Driver{}
	for _, d := range all {
		i := info[d.Name()]
		i.Enabled = cfg.DriverEnabled(d.Name())
		info[d.Name()] = i
		if i.Enabled {
			enabled[d.Name()] = d
		}
		log.Info("driver", "name", d.Name(), "enabled", i.Enabled, "detected", i.Detected, "problem", i.Problem)
	}
	return enabled, info
}
