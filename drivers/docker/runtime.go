package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Prestart runs as the unit's ExecStartPre: it removes a container of the
// same ID that a crash left behind, and prepares the bundle's rootfs: the
// directories of an overlay on the shared image rootfs (upper and work in
// the task directory; Run mounts it), or a copy of the image rootfs, made
// once per task.
func Prestart(ctx context.Context, b Bundle) error {
	if err := deleteContainer(ctx, b); err != nil {
		return err
	}
	rootfs := b.Rootfs()
	if b.Copy {
		marker := rootfs + ".copied"
		if _, err := os.Stat(marker); err == nil {
			return nil
		}
		if err := os.RemoveAll(rootfs); err != nil {
			return fmt.Errorf("remove partial rootfs copy: %w", err)
		}
		if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", b.Lower, rootfs).CombinedOutput(); err != nil {
			return fmt.Errorf("copy the image rootfs: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return os.WriteFile(marker, nil, 0o600)
	}
	upper, work := b.overlayDirs()
	for _, d := range []string{rootfs, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (b Bundle) overlayDirs() (upper, work string) {
	return filepath.Join(b.Dir, "rootfs-upper"), filepath.Join(b.Dir, "rootfs-work")
}

// Run is the unit's main process, started by `unshare --mount` so that it
// has a mount namespace of its own: it mounts the overlay rootfs there
// (the host and other units never see it, and it goes away with the
// container) and execs the runtime. It refuses to run in the host's mount
// namespace.
func Run(b Bundle) error {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	host, err2 := os.Readlink("/proc/1/ns/mnt")
	if err1 != nil || err2 != nil || self == host {
		return fmt.Errorf("docker-run must run in a mount namespace of its own (under unshare --mount)")
	}
	if !b.Copy {
		upper, work := b.overlayDirs()
		if err := unix.Mount("overlay", b.Rootfs(), "overlay", 0, overlayOptions(b.Lower, upper, work)); err != nil {
			return fmt.Errorf("mount overlay rootfs on %s: %w", b.Rootfs(), err)
		}
	}
	argv := b.RunArgv()
	return syscall.Exec(argv[0], argv, os.Environ())
}

// overlayOptions: the shared rootfs below, the task's writes above.
func overlayOptions(lower, upper, work string) string {
	return "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
}

// Poststop runs as the unit's ExecStopPost, also after a crash or a
// failed start: it deletes the container's runtime state.
func Poststop(ctx context.Context, b Bundle) error {
	return deleteContainer(ctx, b)
}

// deleteContainer removes the container's state if the runtime has any.
func deleteContainer(ctx context.Context, b Bundle) error {
	if _, err := os.Stat(filepath.Join(b.Root, b.ID)); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.Runtime, "--root", b.Root, "--cgroup-manager=disabled", "delete", "-f", b.ID).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s delete -f %s: %w: %s", b.Runtime, b.ID, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// MountedLowers returns the lowerdir paths of the overlays mounted in the
// agent's namespace and in those of the runtime processes (each container's
// rootfs overlay lives in the mount namespace of its crun), to keep GC off
// rootfs directories in use.
func MountedLowers() map[string]bool {
	out := map[string]bool{}
	lowersIn("/proc/self/mountinfo", out)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		if comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm")); err == nil && strings.TrimSpace(string(comm)) == "crun" {
			lowersIn(filepath.Join("/proc", p.Name(), "mountinfo"), out)
		}
	}
	return out
}

func lowersIn(mountinfo string, out map[string]bool) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, opts, ok := strings.Cut(sc.Text(), " - overlay ")
		if !ok {
			continue
		}
		for _, o := range strings.Split(opts, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(o), "lowerdir="); ok {
				for _, l := range strings.Split(v, ":") {
					out[unescapeMount(l)] = true
				}
			}
		}
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
