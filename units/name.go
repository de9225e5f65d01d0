package units

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxNameLen is systemd's limit on unit names.
const MaxNameLen = 255

var prefixRe = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)

// Namer builds and parses the names of our units:
// <prefix>-<job>-<task>@<index>.service, each part escaped the way
// systemd-escape does it, so that "-" only ever separates parts and the
// mapping is injective (job "a-b" task "c" ≠ job "a" task "b-c").
type Namer struct {
	Prefix string // e.g. "uv"; lower-case letters and digits only
}

// NewNamer checks the prefix and returns a Namer.
func NewNamer(prefix string) (Namer, error) {
	if !prefixRe.MatchString(prefix) {
		return Namer{}, fmt.Errorf("unit prefix %q: use 1-16 lower-case letters or digits, starting with a letter", prefix)
	}
	return Namer{Prefix: prefix}, nil
}

// Name returns the unit name of instance index of task in job.
func (n Namer) Name(job, task string, index int) (string, error) {
	name := n.Prefix + "-" + Escape(job) + "-" + Escape(task) + "@" + strconv.Itoa(index) + ".service"
	if len(name) > MaxNameLen {
		return "", fmt.Errorf("unit name for job %q task %q is %d bytes, systemd allows %d: use shorter names", job, task, len(name), MaxNameLen)
	}
	return name, nil
}

// Pattern is the glob that matches all our units, for ListUnitsByPatterns.
func (n Namer) Pattern() string { return n.Prefix + "-*@*.service" }

// Owns reports whether a unit name has our prefix and shape.
func (n Namer) Owns(unit string) bool {
	_, _, _, err := n.Parse(unit)
	return err == nil
}

// Parse splits one of our unit names into job, task and index.
func (n Namer) Parse(unit string) (job, task string, index int, err error) {
	rest, ok := strings.CutPrefix(unit, n.Prefix+"-")
	if !ok {
		return "", "", 0, fmt.Errorf("unit %q: not prefixed %q", unit, n.Prefix+"-")
	}
	rest, ok = strings.CutSuffix(rest, ".service")
	if !ok {
		return "", "", 0, fmt.Errorf("unit %q: not a service", unit)
	}
	parts, idx, ok := strings.Cut(rest, "@")
	if !ok {
		return "", "", 0, fmt.Errorf("unit %q: no instance", unit)
	}
	index, err = strconv.Atoi(idx)
	if err != nil || index < 0 || strconv.Itoa(index) != idx {
		return "", "", 0, fmt.Errorf("unit %q: bad instance %q", unit, idx)
	}
	j, t, ok := strings.Cut(parts, "-")
	if !ok || j == "" || t == "" || strings.Contains(t, "-") {
		return "", "", 0, fmt.Errorf("unit %q: want %s-<job>-<task>@<index>.service", unit, n.Prefix)
	}
	if job, err = Unescape(j); err != nil {
		return "", "", 0, fmt.Errorf("unit %q: %w", unit, err)
	}
	if task, err = Unescape(t); err != nil {
		return "", "", 0, fmt.Errorf("unit %q: %w", unit, err)
	}
	return job, task, index, nil
}

// Escape escapes s for use inside a unit name as systemd-escape does:
// every byte outside [A-Za-z0-9_.:] (and a leading ".") becomes \xNN.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isNameByte(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	return b.String()
}

// Unescape reverses Escape.
func Unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 >= len(s) || s[i+1] != 'x' {
			return "", fmt.Errorf("bad escape at %d in %q", i, s)
		}
		v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape at %d in %q", i, s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':'
}

// busPathPrefix is where systemd publishes unit objects.
const busPathPrefix = "/org/freedesktop/systemd1/unit/"

// unitFromPath turns a unit's object path back into its name
// (the bus label escaping is "_xx" for every byte outside [A-Za-z0-9]).
func unitFromPath(path string) (string, bool) {
	label, ok := strings.CutPrefix(path, busPathPrefix)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(label); i++ {
		if label[i] != '_' {
			b.WriteByte(label[i])
			continue
		}
		if i+2 >= len(label) {
			return "", false
		}
		v, err := strconv.ParseUint(label[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
