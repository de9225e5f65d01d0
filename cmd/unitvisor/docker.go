package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/drivers/docker"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/supervisor"
)

// crunStateDir holds each agent's crun --root, by unit prefix, so `crun
// --root /run/unitvisor/crun/uv list` shows one agent's containers.
const crunStateDir = "/run/unitvisor/crun"

// dockerDriver opens the image store, fingerprints crun and returns the
// docker driver (which refuses tasks when crun is missing).
func dockerDriver(ctx context.Context, cfg *config.Agent, self string, info map[string]driverInfo, log *slog.Logger) docker.Driver {
	d := docker.Driver{
		AllowedPaths: cfg.AllowedPaths("docker"),
		StateRoot:    filepath.Join(crunStateDir, cfg.UnitPrefix),
		Helper:       []string{self},
	}
	problem := func(err error) docker.Driver {
		info["docker"] = driverInfo{Problem: err.Error()}
		d.Info = nil
		return d
	}
	if self == "" {
		return problem(fmt.Errorf("the agent's own path is unknown: the unit helpers cannot run"))
	}
	store, err := docker.NewStore(filepath.Join(cfg.DataDir, "oci"), log.With("driver", "docker"))
	if err != nil {
		return problem(err)
	}
	d.Store = store
	if err := os.MkdirAll(d.StateRoot, 0o700); err != nil {
		return problem(fmt.Errorf("crun state dir: %w", err))
	}
	fp, err := docker.Fingerprint(ctx, filepath.Join(cfg.DataDir, "tasks"), d.Helper)
	if err != nil {
		return problem(err)
	}
	d.Info = &fp
	info["docker"] = driverInfo{Detected: true, Fingerprint: fp}
	return d
}

// Image garbage collection: images no live job uses, unused for
// imageGrace, are removed every imageGCEvery (first one minute after start).
const (
	imageGCEvery = 10 * time.Minute
	imageGrace   = 10 * time.Minute
)

// collectImages runs the image store's GC until ctx ends.
func collectImages(ctx context.Context, enabled map[string]supervisor.Driver, sup *supervisor.Supervisor, log *slog.Logger) {
	d, ok := enabled["docker"].(docker.Driver)
	if !ok || d.Store == nil {
		return
	}
	wait := time.Minute
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = imageGCEvery
		insts, err := sup.Instances()
		if err != nil {
			log.Warn("image gc: list instances", "err", err)
			continue
		}
		var tasks []*jobspec.Task
		for _, in := range insts {
			tasks = append(tasks, in.Task)
		}
		res, err := d.Store.GC(docker.Keys(tasks), imageGrace)
		if err != nil {
			log.Warn("image gc", "err", err)
		}
		if len(res.Images)+res.Blobs+res.Rootfs > 0 {
			log.Info("image gc", "images", res.Images, "blobs", res.Blobs, "rootfs", res.Rootfs)
		}
	}
}

// dockerHelper is the ExecStartPre (docker-prestart), main process
// (docker-run, under unshare --mount) and ExecStopPost (docker-poststop)
// of docker tasks, and the agent's overlay probe (docker-overlay-probe
// DIR, under unshare --mount).
func dockerHelper(verb string, args []string, stderr io.Writer) int {
	if verb == "docker-overlay-probe" {
		if len(args) != 1 {
			fmt.Fprintln(stderr, "usage: unitvisor docker-overlay-probe DIR")
			return exitInvalid
		}
		if err := docker.ProbeOverlay(args[0]); err != nil {
			fmt.Fprintln(stderr, "unitvisor docker-overlay-probe:", err)
			return exitFailure
		}
		return exitOK
	}
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b docker.Bundle
	fs.StringVar(&b.Runtime, "runtime", "crun", "OCI runtime")
	fs.StringVar(&b.Root, "root", "", "runtime state directory (--root)")
	fs.StringVar(&b.ID, "id", "", "container ID")
	fs.StringVar(&b.Dir, "bundle", "", "bundle directory (config.json)")
	fs.StringVar(&b.Lower, "lower", "", "the image's shared rootfs")
	fs.BoolVar(&b.Copy, "copy", false, "copy the rootfs instead of an overlay")
	if fs.Parse(args) != nil || b.Root == "" || b.ID == "" || b.Dir == "" || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "usage: unitvisor %s -root DIR -id ID -bundle DIR [-runtime PATH] [-lower DIR] [-copy]\n", verb)
		return exitInvalid
	}
	ctx := context.Background()
	var err error
	switch verb {
	case "docker-prestart", "docker-run":
		if b.Lower == "" {
			fmt.Fprintf(stderr, "unitvisor %s: -lower is required\n", verb)
			return exitInvalid
		}
		if verb == "docker-run" {
			err = docker.Run(b) // returns only on failure
		} else {
			err = docker.Prestart(ctx, b)
		}
	default:
		err = docker.Poststop(ctx, b)
	}
	if err != nil {
		fmt.Fprintf(stderr, "unitvisor %s: %v\n", verb, err)
		return exitFailure
	}
	return exitOK
}
