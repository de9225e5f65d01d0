// Package docker is the "docker" driver: container images run without a
// Docker daemon. The image is pulled from a registry (or loaded from a
// docker save / OCI layout tarball) with go-containerregistry into the
// agent's image store, unpacked once into a root filesystem that every
// task of that image shares read-only (an overlay per task, or a copy
// where overlayfs cannot be used), described by an OCI runtime spec
// (config.json) written into the task directory, and run by crun as the
// unit's main process. crun runs with --cgroup-manager=disabled, so the
// container lives in the unit's cgroup: systemd's limits, accounting,
// restarts and journal apply to it.
//
// runc is not supported: it always manages cgroups itself (it creates a
// cgroup of its own, or joins and then removes the unit's, and needs the
// freezer controller on cgroup v1), which conflicts with systemd owning
// the unit's cgroup.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sys/unix"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// Info is what fingerprinting found.
type Info struct {
	Runtime string `json:"runtime"` // path of crun
	Version string `json:"version"`
	Unshare string `json:"unshare"`        // util-linux unshare: the unit's own mount namespace
	Init    string `json:"init,omitempty"` // static init binary for init = true
	// Overlay reports whether a task's rootfs can be an overlay on the
	// shared image rootfs here; if not, each task gets a copy.
	Overlay bool `json:"overlay"`
}

// initCandidates are static init binaries that can be bound into any
// image: Debian's tini-static (tini is what `docker run --init` uses)
// and catatonit (podman's).
var initCandidates = []string{"/usr/bin/tini-static", "/usr/bin/catatonit", "/usr/libexec/podman/catatonit"}

var versionRE = regexp.MustCompile(`crun version ([0-9][^\s]*)`)

// Fingerprint finds crun, unshare (util-linux) and a static init, and
// tries an overlay mount with its upper layer under tasksDir (where task
// directories live), in a mount namespace of its own: helper is the agent
// binary, whose docker-overlay-probe verb does the mount.
func Fingerprint(ctx context.Context, tasksDir string, helper []string) (Info, error) {
	path, err := exec.LookPath("crun")
	if err != nil {
		if _, rerr := exec.LookPath("runc"); rerr == nil {
			return Info{}, fmt.Errorf("crun is not installed: runc is, but runc always manages cgroups itself and cannot run a container inside a unit's cgroup; install crun (apt-get install crun)")
		}
		return Info{}, fmt.Errorf("crun is not installed on this machine: install it (apt-get install crun)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return Info{}, fmt.Errorf("unshare (util-linux) is not installed: install util-linux")
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return Info{}, fmt.Errorf("%s --version: %w", path, err)
	}
	info := Info{Runtime: path, Unshare: unshare}
	if m := versionRE.FindSubmatch(out); m != nil {
		info.Version = string(m[1])
	}
	for _, c := range initCandidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			info.Init = c
			break
		}
	}
	if len(helper) > 0 {
		if err := os.MkdirAll(tasksDir, 0o755); err == nil {
			argv := append(append([]string{"--mount", "--propagation", "private"}, helper...), "docker-overlay-probe", tasksDir)
			info.Overlay = exec.CommandContext(ctx, unshare, argv...).Run() == nil
		}
	}
	return info, nil
}

// ProbeOverlay mounts and unmounts a small overlay whose upper layer is in
// dir (overlayfs refuses some filesystems as upper, e.g. overlayfs
// itself). Run it in a mount namespace of its own.
func ProbeOverlay(dir string) error {
	probe, err := os.MkdirTemp(dir, ".overlay-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(probe)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(probe, d), 0o755); err != nil {
			return err
		}
	}
	merged := filepath.Join(probe, "merged")
	if err := unix.Mount("overlay", merged, "overlay", 0, overlayOptions(filepath.Join(probe, "lower"), filepath.Join(probe, "upper"), filepath.Join(probe, "work"))); err != nil {
		return fmt.Errorf("overlay with its upper layer in %s: %w", dir, err)
	}
	return unix.Unmount(merged, unix.MNT_DETACH)
}

// Driver is the docker driver.
type Driver struct {
	Info  *Info  // nil: crun not found
	Store *Store // the image store
	// StateRoot is crun's --root: per agent, under /run, so `crun --root
	// DIR list` shows this agent's containers only.
	StateRoot string
	// AllowedPaths are the host directories volumes and load tarballs
	// may come from.
	AllowedPaths []string
	// Helper is the agent binary's command line for the unit's
	// ExecStartPre/ExecStopPost ("unitvisor"); the verb and flags follow.
	Helper []string
}

// Name is the driver name used in job files.
func (Driver) Name() string { return "docker" }

// Check refuses, at submit, what this machine cannot run: no crun, an
// image reference that does not parse, a tarball or volume outside the
// allowed directories, init without an init binary, unreadable auth.
func (d Driver) Check(t *jobspec.Task) (string, error) {
	c := t.Config
	if d.Info == nil {
		return "", fmt.Errorf("crun is not installed on this machine: install it (apt-get install crun)")
	}
	if c.Image != "" {
		if _, err := name.ParseReference(c.Image); err != nil {
			return "config.image", fmt.Errorf("image %q: %v", c.Image, err)
		}
	}
	if c.Load != "" && !strings.Contains(c.Load, "${") {
		if !d.allowed(c.Load) {
			return "config.load", fmt.Errorf("tarball %s is outside the directories this agent allows (%s): move it there or add its directory to driver \"docker\" { allowed_paths }",
				c.Load, d.allowedText())
		}
		if _, err := os.Stat(c.Load); err != nil {
			return "config.load", fmt.Errorf("tarball %s: %w", c.Load, err)
		}
	}
	for _, v := range c.Volumes {
		if !filepath.IsAbs(v.Host) {
			continue // inside the task directory
		}
		if !d.allowed(v.Host) {
			return "config.volumes", fmt.Errorf("volume %s is outside the directories this agent allows (%s): add its directory to driver \"docker\" { allowed_paths }",
				v.Host, d.allowedText())
		}
		if _, err := os.Stat(v.Host); err != nil {
			return "config.volumes", fmt.Errorf("volume %s: %w", v.Host, err)
		}
	}
	if c.Init && d.Info.Init == "" {
		return "config.init", fmt.Errorf("init = true needs a static init binary and none is installed: install tini (apt-get install tini) or catatonit")
	}
	if c.Auth != nil && c.Auth.Config != "" {
		if _, err := readDockerConfig(c.Auth.Config); err != nil {
			return "config.auth", err
		}
	}
	return "", nil
}

func (d Driver) allowedText() string {
	if len(d.AllowedPaths) == 0 {
		return "none"
	}
	return strings.Join(d.AllowedPaths, ", ")
}

// allowed reports whether path is one of the allowed directories or
// below one.
func (d Driver) allowed(path string) bool {
	clean := filepath.Clean(path)
	for _, dir := range d.AllowedPaths {
		if rel, err := filepath.Rel(filepath.Clean(dir), clean); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// Source is where the task's image comes from, with its credentials.
func (d Driver) Source(c jobspec.Config) (Source, error) {
	if c.Load != "" {
		return Source{Load: c.Load}, nil
	}
	src := Source{Ref: c.Image}
	if a := c.Auth; a != nil {
		if a.Config != "" {
			ref, err := name.ParseReference(c.Image)
			if err != nil {
				return Source{}, fmt.Errorf("image %q: %w", c.Image, err)
			}
			cfg, err := readDockerConfig(a.Config)
			if err != nil {
				return Source{}, err
			}
			if ac, ok := cfg.lookup(ref.Context().RegistryStr()); ok {
				src.Auth = authn.FromConfig(ac)
			}
		} else {
			src.Auth = authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password})
		}
	}
	return src, nil
}

// ContainerID is the runtime's name of an instance's container: the unit
// name without ".service", with characters crun and runc reject replaced
// (and then a hash of the unit name added, so IDs stay distinct).
func ContainerID(unit string) string {
	base := strings.TrimSuffix(unit, ".service")
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, base)
	if clean == base {
		return clean
	}
	sum := sha256.Sum256([]byte(unit))
	return clean + "-" + hex.EncodeToString(sum[:4])
}

// Prepare gets the image (a *drivers.NotReadyError while it is being
// fetched), writes config.json into the task directory and returns the
// unit: ExecStartPre removes a stale container of the same name and
// prepares the rootfs (overlay directories, or a copy), ExecStart mounts
// the overlay in the unit's own mount namespace and execs `crun run`,
// and ExecStopPost deletes the container's runtime state.
// KillMode=mixed: kill_signal goes to crun, which forwards it to the
// container's PID 1; after kill_timeout systemd kills everything left.
func (d Driver) Prepare(ctx context.Context, in drivers.Instance) (units.Spec, error) {
	if d.Info == nil {
		return units.Spec{}, fmt.Errorf("crun is not installed on this machine")
	}
	c := in.Task.Config
	src, err := d.Source(c)
	if err != nil {
		return units.Spec{}, err
	}
	img, err := d.Store.Get(ctx, src)
	if err != nil {
		return units.Spec{}, err
	}
	user, err := ResolveUser(img.Rootfs, userName(in.Task.User, img.Config.Config.User))
	if err != nil {
		return units.Spec{}, err
	}
	if err := drivers.MakeTaskDir(in.TaskDir, drivers.Account{UID: int(user.UID), GID: int(user.GID)}); err != nil {
		return units.Spec{}, err
	}
	mounts, err := d.volumes(in)
	if err != nil {
		return units.Spec{}, err
	}
	si := SpecInput{
		Instance: in,
		Image: v1Config{Env: img.Config.Config.Env, Entrypoint: img.Config.Config.Entrypoint,
			Cmd: img.Config.Config.Cmd, WorkingDir: img.Config.Config.WorkingDir},
		User: user, Mounts: mounts, Hosts: hostFiles(),
	}
	if c.Init {
		if d.Info.Init == "" {
			return units.Spec{}, fmt.Errorf("init = true needs a static init binary (tini-static or catatonit)")
		}
		si.Init = d.Info.Init
	}
	spec, err := Spec(si)
	if err != nil {
		return units.Spec{}, err
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return units.Spec{}, err
	}
	if err := writeAtomic(filepath.Join(in.TaskDir, "config.json"), b, 0o600); err != nil {
		return units.Spec{}, fmt.Errorf("write config.json: %w", err)
	}
	bundle := Bundle{Runtime: d.Info.Runtime, Root: d.StateRoot, ID: ContainerID(in.Unit), Dir: in.TaskDir,
		Lower: img.Rootfs, Copy: !d.Info.Overlay}
	props, err := drivers.Base(in)
	if err != nil {
		return units.Spec{}, err
	}
	props = append(props,
		units.Exec("ExecStartPre", append(append([]string{}, d.Helper...), bundle.Flags("docker-prestart")...), false),
		// The main process is `unitvisor docker-run` in a mount namespace
		// of its own (unshare execs it, it mounts the overlay and execs
		// crun): the overlay never shows on the host or in other units.
		units.Exec("ExecStart", append(append([]string{d.Info.Unshare, "--mount", "--propagation", "slave"}, d.Helper...), bundle.Flags("docker-run")...), false),
		units.Exec("ExecStopPost", append(append([]string{}, d.Helper...), bundle.Flags("docker-poststop")...), true),
		units.String("KillMode", "mixed"),
		// "-": ExecStopPost must run (and delete the container's state)
		// even when the task directory is already gone.
		units.String("WorkingDirectory", "-"+in.TaskDir),
		// The journal shows the task's name, not "crun".
		units.String("SyslogIdentifier", in.Task.Name),
	)
	if sig := drivers.Signal(in.Task.KillSignal); sig != unix.SIGKILL {
		// crun exits 128+N when the container's PID 1 ends by signal N:
		// ending by kill_signal is a clean stop, as a signal death is for
		// systemd (137, an OOM or timeout SIGKILL, stays a failure).
		props = append(props, units.ExitStatus("SuccessExitStatus", []int32{128 + int32(sig)}, nil))
	}
	return units.Spec{Name: in.Unit, Properties: props}, nil
}

// userName is the task's user, else the image's.
func userName(task, image string) string {
	if task != "" {
		return task
	}
	return image
}

// volumes resolves the task's volumes on the host: relative host paths are
// below the task directory (and created); absolute ones must be allowed.
func (d Driver) volumes(in drivers.Instance) ([]Mount, error) {
	var out []Mount
	for _, v := range in.Task.Config.Volumes {
		host := v.Host
		if !filepath.IsAbs(host) {
			host = filepath.Join(in.TaskDir, host)
			if err := os.MkdirAll(host, 0o755); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Host, err)
			}
		} else if !d.allowed(host) {
			return nil, fmt.Errorf("volume %s is outside the allowed directories", host)
		}
		if _, err := os.Stat(host); err != nil {
			return nil, fmt.Errorf("volume %s: %w", host, err)
		}
		out = append(out, Mount{Host: host, Container: v.Container, ReadOnly: v.ReadOnly})
	}
	return out, nil
}

// hostFiles are the host's name resolution files a host-network container
// shares, read-only.
func hostFiles() []string {
	var out []string
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

// Bundle is one container as the unit's helpers and crun see it.
type Bundle struct {
	Runtime string // crun
	Root    string // crun --root
	ID      string // container ID
	Dir     string // bundle: the task directory, with config.json
	Lower   string // the image's shared rootfs
	Copy    bool   // copy Lower instead of an overlay
}

// Rootfs is the container's root filesystem in the bundle.
func (b Bundle) Rootfs() string { return filepath.Join(b.Dir, "rootfs") }

// RunArgv is the unit's ExecStart. --no-new-keyring: the container keeps
// the unit's session keyring (systemd gives each service a private one),
// and keyctl is filtered in some sandboxes.
func (b Bundle) RunArgv() []string {
	return []string{b.Runtime, "--root", b.Root, "--cgroup-manager=disabled",
		"run", "--no-new-keyring", "--bundle", b.Dir, b.ID}
}

// Flags renders the bundle for the helper verb.
func (b Bundle) Flags(verb string) []string {
	f := []string{verb, "-runtime", b.Runtime, "-root", b.Root, "-id", b.ID, "-bundle", b.Dir}
	if b.Lower != "" {
		f = append(f, "-lower", b.Lower)
	}
	if b.Copy {
		f = append(f, "-copy")
	}
	return f
}

// helperTimeout bounds one runtime call of a helper.
const helperTimeout = 30 * time.Second
