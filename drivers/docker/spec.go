package docker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/jobspec"
)

// DefaultCapabilities are the capabilities a container gets unless
// cap_add or cap_drop say otherwise: Docker's default set.
var DefaultCapabilities = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP",
	"CAP_SETUID", "CAP_SYS_CHROOT",
}

// ociVersion is the runtime-spec version config.json declares: crun 1.8
// (Debian 12) refuses versions it does not know, such as 1.3.0, and
// nothing newer than 1.0 is used.
const ociVersion = "1.0.2"

// defaultPath is the PATH of a container whose image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// InitPath is where the init binary is mounted in the container: inside
// the runtime's /dev tmpfs, so the image's filesystem is never touched.
const InitPath = "/dev/init"

// ContainerDirs are the task directory's parts mounted into the container,
// host subdirectory -> container path.
var ContainerDirs = [][2]string{{"local", "/local"}, {"secrets", "/secrets"}}

// ContainerTaskDir is ${UNITVISOR_TASK_DIR} inside a container: its local/
// and secrets/ are at /local and /secrets, so "${UNITVISOR_TASK_DIR}/local"
// names the same directory inside as outside.
const ContainerTaskDir = "/"

// User is the resolved user a container process runs as.
type User struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups from the image's /etc/group
	Home     string
}

// Mount is a bind mount of a host path into the container.
type Mount struct {
	Host, Container string
	ReadOnly        bool
}

// SpecInput is what the runtime spec of one instance is made from.
type SpecInput struct {
	Instance drivers.Instance
	Image    v1Config
	User     User
	Mounts   []Mount  // volumes, resolved on the host
	Init     string   // host path of the init binary; "" for none
	Hosts    []string // host files bound read-only: /etc/resolv.conf, /etc/hosts
}

// v1Config is the part of an image's config the spec is made from.
type v1Config struct {
	Env        []string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
}

// ContainerVars returns the instance's UNITVISOR_* values as the
// container sees them.
func ContainerVars(in drivers.Instance) map[string]string {
	vars := make(map[string]string, len(in.Vars))
	for k, v := range in.Vars {
		vars[k] = v
	}
	vars[jobspec.VarTaskDir] = ContainerTaskDir
	return vars
}

// Argv is the container's command line: the entrypoint (the task's, else
// the image's) and the args (the task's, else the image's Cmd). As in
// Docker, a task entrypoint drops the image's Cmd.
func Argv(c jobspec.Config, img v1Config, vars map[string]string) ([]string, error) {
	entrypoint, cmd := img.Entrypoint, img.Cmd
	if len(c.Entrypoint) > 0 {
		entrypoint, cmd = interpolateAll(c.Entrypoint, vars), nil
	}
	if len(c.Args) > 0 {
		cmd = interpolateAll(c.Args, vars)
	}
	argv := append(slices.Clone(entrypoint), cmd...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("the image has no Entrypoint or Cmd: set entrypoint or args in the task's config")
	}
	return argv, nil
}

func interpolateAll(list []string, vars map[string]string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = jobspec.Interpolate(s, vars)
	}
	return out
}

// Env is the container's environment: the image's, then PATH and HOME
// when it lacks them, then the task's env, then the UNITVISOR_* values.
func Env(t *jobspec.Task, img v1Config, u User, vars map[string]string) []string {
	var keys []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	for _, kv := range img.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	if _, ok := vals["PATH"]; !ok {
		set("PATH", defaultPath)
	}
	if _, ok := vals["HOME"]; !ok {
		set("HOME", u.Home)
	}
	for _, k := range sortedKeys(t.Env) {
		set(k, jobspec.Interpolate(t.Env[k], vars))
	}
	for _, k := range sortedKeys(vars) {
		set(k, vars[k])
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + vals[k]
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Capabilities applies cap_drop, then cap_add, to Docker's default set.
func Capabilities(c jobspec.Config) []string {
	caps := slices.Clone(DefaultCapabilities)
	if slices.Contains(c.CapDrop, jobspec.CapabilityAll) {
		caps = nil
	} else {
		caps = slices.DeleteFunc(caps, func(s string) bool { return slices.Contains(c.CapDrop, s) })
	}
	if slices.Contains(c.CapAdd, jobspec.CapabilityAll) {
		caps = slices.Clone(jobspec.LinuxCapabilities)
	} else {
		caps = append(caps, c.CapAdd...)
	}
	slices.Sort(caps)
	return slices.Compact(caps)
}

// Spec builds the OCI runtime spec of an instance. It carries no resource
// limits and no cgroup path: the container stays in the unit's cgroup,
// where systemd applies the task's resources.
func Spec(si SpecInput) (*specs.Spec, error) {
	in := si.Instance
	t, c := in.Task, in.Task.Config
	vars := ContainerVars(in)
	argv, err := Argv(c, si.Image, vars)
	if err != nil {
		return nil, err
	}
	if si.Init != "" {
		argv = append([]string{InitPath, "--"}, argv...)
	}
	cwd := c.WorkDir
	if cwd == "" {
		cwd = si.Image.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	caps := Capabilities(c)
	spec := &specs.Spec{
		Version: ociVersion,
		Process: &specs.Process{
			User: specs.User{UID: si.User.UID, GID: si.User.GID, AdditionalGids: si.User.Groups},
			Args: argv,
			Env:  Env(t, si.Image, si.User, vars),
			Cwd:  cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
		},
		Root: &specs.Root{Path: "rootfs", Readonly: c.ReadonlyRootfs},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Annotations: map[string]string{
			"org.unitvisor.job":  in.Job.Name,
			"org.unitvisor.task": t.Name,
			"org.unitvisor.unit": in.Unit,
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.MountNamespace}},
			MaskedPaths: []string{
				"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
				"/sys/firmware", "/sys/devices/virtual/powercap",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	if c.NetworkMode == jobspec.NetworkNone {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces,
			specs.LinuxNamespace{Type: specs.NetworkNamespace}, specs.LinuxNamespace{Type: specs.UTSNamespace})
		spec.Hostname = fmt.Sprintf("%s-%d", t.Name, in.Index)
	} else {
		for _, h := range si.Hosts {
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: h, Type: "bind", Source: h, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		}
	}
	for _, d := range ContainerDirs {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: d[1], Type: "bind",
			Source: path.Join(in.TaskDir, d[0]), Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	for _, m := range si.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: m.Container, Type: "bind", Source: m.Host, Options: []string{"rbind", mode}})
	}
	if si.Init != "" {
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: InitPath, Type: "bind", Source: si.Init, Options: []string{"bind", "ro"}})
	}
	if r := t.Resources; r != nil {
		for _, entry := range r.Devices {
			p, _ := jobspec.ParseDevice(entry)
			dev, err := drivers.Device(p)
			if err != nil {
				return nil, err
			}
			mode := os.FileMode(0o666)
			spec.Linux.Devices = append(spec.Linux.Devices, specs.LinuxDevice{
				Path: p, Type: dev.Type, Major: *dev.Major, Minor: *dev.Minor, FileMode: &mode,
			})
		}
	}
	return spec, nil
}

// ResolveUser finds the user a container runs as in the image's
// /etc/passwd and /etc/group (read inside rootfs): name is the task's
// user, else the image's ("name", "uid", "name:group" or "uid:gid"),
// else root. A numeric uid need not exist in the image.
func ResolveUser(rootfs, name string) (User, error) {
	if name == "" {
		name = "0"
	}
	userPart, groupPart, hasGroup := strings.Cut(name, ":")
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return User{}, err
	}
	defer root.Close()
	passwd, _ := root.ReadFile("etc/passwd")
	group, _ := root.ReadFile("etc/group")
	u := User{Home: "/"}
	var userName string
	found := false
	for _, f := range colonRecords(passwd, 7) {
		if f[0] == userPart || f[2] == userPart {
			uid, err1 := strconv.ParseUint(f[2], 10, 32)
			gid, err2 := strconv.ParseUint(f[3], 10, 32)
			if err1 != nil || err2 != nil {
				continue
			}
			u.UID, u.GID, u.Home, userName, found = uint32(uid), uint32(gid), f[5], f[0], true
			break
		}
	}
	if !found {
		uid, err := strconv.ParseUint(userPart, 10, 32)
		if err != nil {
			return User{}, fmt.Errorf("user %q is not in the image's /etc/passwd: use a user of the image or a numeric uid", userPart)
		}
		u.UID, u.GID = uint32(uid), uint32(uid)
		if uid == 0 {
			u.GID = 0
		}
	}
	if u.Home == "" {
		u.Home = "/"
	}
	if hasGroup {
		gid, err := strconv.ParseUint(groupPart, 10, 32)
		if err != nil {
			ok := false
			for _, f := range colonRecords(group, 4) {
				if f[0] == groupPart {
					if g, err := strconv.ParseUint(f[2], 10, 32); err == nil {
						gid, ok = g, true
						break
					}
				}
			}
			if !ok {
				return User{}, fmt.Errorf("group %q is not in the image's /etc/group", groupPart)
			}
		}
		u.GID = uint32(gid)
	}
	if userName != "" {
		for _, f := range colonRecords(group, 4) {
			if slices.Contains(strings.Split(f[3], ","), userName) {
				if g, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(g) != u.GID {
					u.Groups = append(u.Groups, uint32(g))
				}
			}
		}
	}
	return u, nil
}

// colonRecords splits /etc/passwd-style content into records of n fields.
func colonRecords(b []byte, n int) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < n {
			continue
		}
		out = append(out, f)
	}
	return out
}
