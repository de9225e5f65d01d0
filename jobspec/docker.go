package jobspec

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Volume is a host directory (or file) mounted into a docker task's
// container.
type Volume struct {
	Host      string `json:"host"`      // absolute, or relative to the task directory
	Container string `json:"container"` // absolute path in the container
	ReadOnly  bool   `json:"read_only,omitempty"`
}

// RegistryAuth are the credentials a docker task pulls its image with:
// Username and Password, or Config, the path of a docker config.json whose
// "auths" hold an entry for the image's registry.
type RegistryAuth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Config   string `json:"config,omitempty"`
}

// Network modes of the docker driver.
const (
	NetworkHost = "host" // the host's network namespace (default)
	NetworkNone = "none" // a namespace of its own with only loopback
)

// CapabilityAll in cap_add or cap_drop stands for every capability.
const CapabilityAll = "ALL"

// LinuxCapabilities are the capability names cap_add and cap_drop accept
// (with or without the CAP_ prefix, in any case).
var LinuxCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// imageRefRE is a pragmatic form of an image reference: an optional
// registry host[:port], lowercase path components, an optional tag and an
// optional digest. The docker driver parses it fully when a job is
// submitted.
var imageRefRE = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`)

// decodeDockerConfig decodes the docker driver's fields: image or load,
// entrypoint, work_dir, volumes, readonly_rootfs, network_mode, auth,
// cap_add, cap_drop and init.
func (d *decoder) decodeDockerConfig(cfg *Config, block *hcl.Block, driver string, attrs hcl.Attributes, vars []string) {
	if a := attrs["image"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if imageRefRE.MatchString(s) {
				cfg.Image = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid image",
					`image %q is not an image reference such as "debian:12" or "registry.example.com/team/app:1.0" (repository names are lowercase)`, s)
			}
		}
	}
	if a := attrs["load"]; a != nil {
		// No references: the agent checks the tarball at submit.
		if s, ok := d.stringAttr(a); ok {
			if path.IsAbs(s) {
				cfg.Load = path.Clean(s)
			} else {
				d.errorf(a.Expr.Range(), "Invalid path", "load %q is not an absolute path; use the absolute path", s)
			}
		}
	}
	if a := attrs["entrypoint"]; a != nil {
		cfg.Entrypoint = d.decodeArgs(a, vars)
	}
	if a := attrs["work_dir"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if path.IsAbs(s) {
				cfg.WorkDir = path.Clean(s)
			} else {
				d.errorf(a.Expr.Range(), "Invalid work_dir", "work_dir %q is not an absolute path in the container, e.g. /app", s)
			}
		}
	}
	if a := attrs["volumes"]; a != nil {
		for i, s := range d.plainStrings(a, `["/srv/data:/data", "/etc/app:/etc/app:ro"]`) {
			v, err := parseVolume(s)
			if err != nil {
				d.errorf(a.Expr.Range(), "Invalid volume", "volumes[%d]: %v", i, err)
				continue
			}
			cfg.Volumes = append(cfg.Volumes, v)
		}
	}
	if a := attrs["readonly_rootfs"]; a != nil {
		cfg.ReadonlyRootfs = d.dockerBool(a)
	}
	if a := attrs["init"]; a != nil {
		cfg.Init = d.dockerBool(a)
	}
	if a := attrs["network_mode"]; a != nil {
		if s, ok := d.stringAttr(a); ok {
			if s == NetworkHost || s == NetworkNone {
				cfg.NetworkMode = s
			} else {
				d.errorf(a.Expr.Range(), "Invalid network_mode",
					`unknown network_mode %q;%s use "host" (the host's network, the default) or "none" (loopback only)`,
					s, didYouMean(s, []string{NetworkHost, NetworkNone}))
			}
		}
	}
	for _, name := range []string{"cap_add", "cap_drop"} {
		a := attrs[name]
		if a == nil {
			continue
		}
		var caps []string
		for _, s := range d.plainStrings(a, `["NET_ADMIN"]`) {
			c, err := canonicalCapability(s)
			if err != nil {
				d.errorf(a.Expr.Range(), "Invalid capability", "%s: %v", name, err)
				continue
			}
			caps = append(caps, c)
		}
		if name == "cap_add" {
			cfg.CapAdd = caps
		} else {
			cfg.CapDrop = caps
		}
	}
	if a := attrs["auth"]; a != nil {
		cfg.Auth = d.decodeAuth(a)
	}
	if driver != "docker" {
		return
	}
	switch {
	case attrs["image"] == nil && attrs["load"] == nil:
		d.errorf(block.DefRange, "Missing image or load",
			`driver "docker" runs an image: add image = "registry.example.com/app:1.0", or load = "/var/lib/images/app.tar" (a docker save or OCI layout tarball)`)
	case attrs["image"] != nil && attrs["load"] != nil:
		d.errorf(attrs["load"].Expr.Range(), "Conflicting config", "set either image or load, not both")
	case attrs["auth"] != nil && attrs["image"] == nil:
		d.errorf(attrs["auth"].Expr.Range(), "Conflicting config", "auth goes with image: a loaded tarball needs no registry")
	}
}

// plainStrings decodes a list of strings without references; example is
// shown when the value is not a list.
func (d *decoder) plainStrings(a *hcl.Attribute, example string) []string {
	v, ok := d.evalPlain(a)
	if !ok {
		return nil
	}
	if ty := v.Type(); !ty.IsTupleType() && !ty.IsListType() {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%s must be a list of strings, e.g. %s = %s; got %s",
			a.Name, a.Name, example, ty.FriendlyName())
		return nil
	}
	var out []string
	for i, elem := range v.AsValueSlice() {
		if s, ok := d.toString(a.Expr, elem, fmt.Sprintf("%s[%d]", a.Name, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

// dockerBool evaluates a bool attribute without references; a wrong value
// is reported and decodes as false.
func (d *decoder) dockerBool(a *hcl.Attribute) bool {
	val, ok := d.evalPlain(a)
	if !ok {
		return false
	}
	if val.Type() != cty.Bool {
		d.errorf(a.Expr.Range(), "Invalid type", "%s must be true or false, got %s", a.Name, val.Type().FriendlyName())
		return false
	}
	return val.True()
}

// decodeAuth decodes auth = { username = "...", password = "..." } or
// auth = { config = "/path/to/config.json" }.
func (d *decoder) decodeAuth(a *hcl.Attribute) *RegistryAuth {
	const example = `auth = { username = "user", password = "secret" } or auth = { config = "/root/.docker/config.json" }`
	v, ok := d.evalPlain(a)
	if !ok {
		return nil
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		d.errorf(a.Expr.Range(), "Invalid auth", "auth must be an object: %s", example)
		return nil
	}
	fields := v.AsValueMap()
	auth := &RegistryAuth{}
	valid := true
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		s, ok := d.toString(a.Expr, fields[k], "auth."+k)
		if !ok {
			valid = false
			continue
		}
		switch k {
		case "username":
			auth.Username = s
		case "password":
			auth.Password = s
		case "config":
			if !strings.HasPrefix(s, "/") {
				d.errorf(a.Expr.Range(), "Invalid auth", "auth.config %q is not an absolute path", s)
				valid = false
			}
			auth.Config = s
		default:
			d.errorf(a.Expr.Range(), "Invalid auth", "unknown auth field %q;%s allowed: username, password, config",
				k, didYouMean(k, []string{"username", "password", "config"}))
			valid = false
		}
	}
	if !valid {
		return nil
	}
	switch {
	case auth.Config != "" && (auth.Username != "" || auth.Password != ""):
		d.errorf(a.Expr.Range(), "Invalid auth", "set either auth.config or username and password, not both")
	case auth.Config == "" && (auth.Username == "" || auth.Password == ""):
		d.errorf(a.Expr.Range(), "Invalid auth", "auth needs both username and password (or config): %s", example)
	default:
		return auth
	}
	return nil
}

// parseVolume parses "host:container[:ro|rw]".
func parseVolume(s string) (Volume, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Volume{}, fmt.Errorf(`%q is not "host:container" or "host:container:ro"`, s)
	}
	v := Volume{Host: parts[0], Container: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			v.ReadOnly = true
		case "rw":
		default:
			return Volume{}, fmt.Errorf(`%q: mode %q must be "ro" or "rw"`, s, parts[2])
		}
	}
	if v.Host == "" {
		return Volume{}, fmt.Errorf("%q has no host path", s)
	}
	if !path.IsAbs(v.Container) {
		return Volume{}, fmt.Errorf("%q: the container path %q is not absolute", s, v.Container)
	}
	v.Container = path.Clean(v.Container)
	if v.Container == "/" {
		return Volume{}, fmt.Errorf("%q: a volume cannot replace the container's /", s)
	}
	v.Host = path.Clean(v.Host)
	if !path.IsAbs(v.Host) && (v.Host == ".." || strings.HasPrefix(v.Host, "../")) {
		return Volume{}, fmt.Errorf("%q: a relative host path stays inside the task directory; use an absolute path", s)
	}
	return v, nil
}

// canonicalCapability returns "CAP_X" for "x", "X" or "CAP_X", or "ALL".
func canonicalCapability(s string) (string, error) {
	up := strings.ToUpper(strings.TrimSpace(s))
	if up == CapabilityAll {
		return up, nil
	}
	if !strings.HasPrefix(up, "CAP_") {
		up = "CAP_" + up
	}
	if slices.Contains(LinuxCapabilities, up) {
		return up, nil
	}
	return "", fmt.Errorf("unknown capability %q;%s use a Linux capability such as NET_ADMIN or SYS_PTRACE, or ALL",
		s, didYouMean(up, LinuxCapabilities))
}
