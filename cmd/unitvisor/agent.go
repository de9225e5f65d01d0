package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/metrics"
	"github.com/unitvisor/unitvisor/supervisor"
	"github.com/unitvisor/unitvisor/units"
)

func runAgent(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "agent config file (HCL)")
	if fs.Parse(args) != nil {
		return exitInvalid
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitInvalid
	}
	level, _ := cfg.Level()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent(ctx, cfg, log); err != nil {
		log.Error("agent", "err", err)
		return exitFailure
	}
	return exitOK
}

// agent runs until ctx ends. Tasks are their own units: they keep running
// when the agent stops.
func agent(ctx context.Context, cfg *config.Agent, log *slog.Logger) error {
	namer, err := units.NewNamer(cfg.UnitPrefix)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	store, err := supervisor.OpenStore(cfg.DataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	ln, err := listen(cfg.Socket)
	if err != nil {
		return err
	}
	defer ln.Close()
	metricsLn, err := net.Listen("tcp", cfg.Metrics.Address)
	if err != nil {
		return fmt.Errorf("metrics: %w (change metrics { address } in the agent config)", err)
	}
	defer metricsLn.Close()
	mets := metrics.New(metrics.Config{
		Slice: cfg.Slice, Usage: units.Cgroups{Root: cgroupRoot}, UsageInterval: cfg.Metrics.Usage(),
		StateFile: filepath.Join(cfg.DataDir, "metrics.json"), Version: version,
	}, log)

	conn, err := units.Dial(ctx, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetObserver(mets)
	watcher := units.NewWatcher(conn, namer, 30*time.Second, log)
	watcher.OOM = units.NewOOMNotifier(cgroupRoot, cfg.Slice)
	go watcher.Run(ctx)
	select {
	case <-watcher.Synced():
	case <-ctx.Done():
		return nil
	}

	enabled, driverInfo := buildDrivers(ctx, cfg, log)
	node, err := supervisor.DetectNode(cfg.Reserved.MemoryMB, cfg.Reserved.Cores)
	if err != nil {
		return err
	}
	cgroups := units.Cgroups{Root: cgroupRoot}
	bridge, err := newConsulBridge(cfg, conn, mets, log)
	if err != nil {
		return err
	}
	// Under WatchdogSec= (unitvisor.service), ping systemd from the
	// supervisor's loop three times per period.
	var heartbeat func()
	var beatEvery time.Duration
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		beatEvery = wd / 3
		heartbeat = func() {
			if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
				log.Warn("sd_notify watchdog", "err", err)
			}
		}
	}
	var stopHook supervisor.StopHook
	if bridge != nil {
		stopHook = bridge // deregister, then shutdown_delay, before each stop
	}
	sup := supervisor.New(supervisor.Config{
		DataDir: cfg.DataDir, Namer: namer, Slice: cfg.Slice,
		Ports:    supervisor.PortRange{Min: cfg.Ports.Min, Max: cfg.Ports.Max},
		Drivers:  enabled,
		Node:     node,
		Launcher: launcherPath(log),
		// Desired state and reconcile durations for metrics.
		Reconciled: mets.Reconciled,
		StopHook:   stopHook,
		Usage: func(unit string) (units.Usage, bool) {
			u, err := cgroups.Usage(units.UnitCgroup(cfg.Slice, unit))
			return u, err == nil
		},
		Heartbeat: heartbeat, HeartbeatEvery: beatEvery,
	}, store, conn, watcher, log)
	go mets.Run(ctx, sup.Subscribe(1024))
	go collectImages(ctx, enabled, sup, log)
	if bridge != nil {
		go bridge.Run(ctx, sup, sup.Subscribe(1024))
	}
	go func() {
		if err := mets.Serve(ctx, metricsLn); err != nil {
			log.Error("metrics server", "err", err)
		}
	}()

	info := func() any {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return map[string]any{
			"version": version, "systemd_version": conn.Version(), "unit_prefix": cfg.UnitPrefix,
			"slice": cfg.Slice, "data_dir": cfg.DataDir, "drivers": driverInfo,
			"metrics_address":  metricsLn.Addr().String(),
			"heap_inuse_bytes": ms.HeapInuse, "goroutines": runtime.NumGoroutine(),
		}
	}
	srv := &http.Server{Handler: sup.Handler(info), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api server", "err", err)
		}
	}()
	defer srv.Close()

	log.Info("agent starting", "version", version, "systemd", conn.Version(), "socket", cfg.Socket, "data_dir", cfg.DataDir)
	ready := func() {
		log.Info("agent ready")
		if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
			log.Warn("sd_notify", "err", err)
		}
	}
	return sup.Run(ctx, watcher.Events(), ready)
}

const cgroupRoot = "/sys/fs/cgroup"

// listen opens the API socket (mode 0660), refusing when another agent
// answers on it and replacing a stale file otherwise.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another agent is listening on %s: stop it first", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}
