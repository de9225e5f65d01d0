package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

var (
	// v1.2.3, v1.2.3-rc1, each optionally followed by -N-gHASH (commits
	// since the tag) and -dirty.
	describeTag = regexp.MustCompile(`^v?([0-9]+(?:\.[0-9]+)*)(?:-([0-9A-Za-z.]+?))??(?:-([0-9]+)-g([0-9a-f]+))?$`)
	// A bare abbreviated hash: no tag reachable.
	describeHash = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
	validVersion = regexp.MustCompile(`^[0-9][0-9A-Za-z.+~]*$`)
)

// PackageVersion turns `git describe --tags --always --dirty` output into a
// version that dpkg and rpm both accept and order by history: no "-" (the
// Debian package is native, RPM forbids it), "~" before a prerelease so
// 1.2.3~rc1 sorts before 1.2.3, "+N.gHASH" for commits after a tag. Without
// a tag the version is 0.0.0+git<commit time>.g<hash>, so later commits
// still sort higher. An empty or "dev" describe (no git) gives
// 0.0.0+unknown.
func PackageVersion(describe string, commit time.Time) (string, error) {
	d := strings.TrimSpace(describe)
	dirty := strings.HasSuffix(d, "-dirty")
	d = strings.TrimSuffix(d, "-dirty")
	var v string
	switch {
	case d == "" || d == "dev":
		v = "0.0.0+unknown"
	case describeHash.MatchString(d):
		v = "0.0.0+git" + commit.UTC().Format("20060102150405") + ".g" + d
	default:
		m := describeTag.FindStringSubmatch(d)
		if m == nil {
			return "", fmt.Errorf("package version from %q: want a tag like v1.2.3 (or v1.2.3-rc1) or no tag at all", describe)
		}
		v = m[1]
		if m[2] != "" {
			v += "~" + m[2]
		}
		if m[3] != "" {
			v += "+" + m[3] + ".g" + m[4]
		}
	}
	if dirty {
		if strings.Contains(v, "+") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	if !validVersion.MatchString(v) {
		return "", fmt.Errorf("package version from %q: %q is not a valid package version", describe, v)
	}
	return v, nil
}
