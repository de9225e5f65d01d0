package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Prestart runs as the unit's ExecStartPre: it removes a container of the
// same ID that a crash left behind, and makes the bundle's rootfs, an
// overlay on the shared image rootfs with its upper and work directories
// in the task directory, or a copy of it (made once per task).
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
	upper, work := filepath.Join(b.Dir, "rootfs-upper"), filepath.Join(b.Dir, "rootfs-work")
	for _, d := range []string{rootfs, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if mounted, err := isMountPoint(rootfs); err != nil {
		return err
	} else if mounted {
		// Left by a run whose ExecStopPost did not happen.
		if err := unix.Unmount(rootfs, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount stale rootfs: %w", err)
		}
	}
	if err := unix.Mount("overlay", rootfs, "overlay", 0, overlayOptions(b.Lower, upper, work)); err != nil {
		return fmt.Errorf("mount overlay rootfs on %s: %w", rootfs, err)
	}
	return nil
}

// overlayOptions: the shared rootfs below, the task's writes above.
func overlayOptions(lower, upper, work string) string {
	return "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
}

// Poststop runs as the unit's ExecStopPost, also after a crash or a
// failed start: it deletes the container's runtime state and unmounts the
// overlay rootfs.
func Poststop(ctx context.Context, b Bundle) error {
	errDelete := deleteContainer(ctx, b)
	var errUnmount error
	if mounted, err := isMountPoint(b.Rootfs()); err != nil {
		errUnmount = err
	} else if mounted {
		errUnmount = unix.Unmount(b.Rootfs(), unix.MNT_DETACH)
	}
	return errors.Join(errDelete, errUnmount)
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

// isMountPoint reports whether path is a mount point (in this process's
// mount namespace).
func isMountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// MountedLowers returns the lowerdir paths of the overlays mounted now, to
// keep GC off rootfs directories in use.
func MountedLowers() map[string]bool {
	out := map[string]bool{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, opts, ok := strings.Cut(line, " - overlay ")
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
	return out
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
