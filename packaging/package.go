package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// files/ holds what goes into the package as written: the agent's unit,
// its default configuration, the maintainer scripts, bash completion.
//
//go:embed files
var static embed.FS

// Build is one packaging run.
type Build struct {
	Bin        string    // the unitvisor binary to package
	Version    string    // package version (PackageVersion)
	Describe   string    // git describe, for the changelog
	Time       time.Time // SOURCE_DATE_EPOCH: every timestamp in the packages
	Maintainer string
	Licence    Licence // unitvisor's own
	GoRoot     string  // for the standard library's licence
	ModCache   string  // for the modules' licences
	Out        string  // where the packages (and a staging dir) go
}

const description = `run jobs as transient systemd units
 unitvisor is a single-node service supervisor. Each task of a Nomad-like
 job file runs as a transient systemd unit (uv-<job>-<task>@<index>.service
 in unitvisor.slice): systemd starts, isolates, restarts and logs the
 processes, and systemctl and journalctl work on every task. The agent keeps
 the desired state and adopts running units when it restarts, so tasks
 never restart because the agent did.
 .
 This package runs the agent as unitvisor.service.`

// Packages writes the .deb and the .rpm into b.Out and returns their paths.
func (b Build) Packages() ([]string, error) {
	stage := filepath.Join(b.Out, "stage")
	if err := os.RemoveAll(stage); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, err
	}
	gen, err := b.generate(stage)
	if err != nil {
		return nil, err
	}
	libc, err := glibcVersion(b.Bin)
	if err != nil {
		return nil, err
	}

	contents := func(format string) files.Contents {
		c := files.Contents{
			file(b.Bin, "/usr/bin/unitvisor", 0o755, ""),
			file(gen["unitvisor.service"], "/usr/lib/systemd/system/unitvisor.service", 0o644, ""),
			file(gen["agent.hcl"], "/etc/unitvisor/agent.hcl", 0o644, files.TypeConfigNoReplace),
			file(gen["unitvisor.bash-completion"], "/usr/share/bash-completion/completions/unitvisor", 0o644, ""),
			file(gen["unitvisor.1.gz"], "/usr/share/man/man1/unitvisor.1.gz", 0o644, ""),
			file(gen["copyright"], "/usr/share/doc/unitvisor/copyright", 0o644, ""),
			file(gen["changelog.gz"], "/usr/share/doc/unitvisor/changelog.gz", 0o644, ""),
		}
		if format == "deb" {
			c = append(c, file(gen["lintian-overrides"], "/usr/share/lintian/overrides/unitvisor", 0o644, ""))
		}
		return c
	}
	base := nfpm.Info{
		Name:          "unitvisor",
		Arch:          "amd64",
		Platform:      "linux",
		Version:       b.Version,
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    b.Maintainer,
		Description:   description,
		Vendor:        "unitvisor",
		License:       b.Licence.Name,
		MTime:         b.Time,
	}

	debInfo := base
	debInfo.Overridables = nfpm.Overridables{
		Depends:  []string{"libc6 (>= " + libc + ")", "systemd", "default-dbus-system-bus | dbus-system-bus"},
		Contents: contents("deb"),
		Scripts: nfpm.Scripts{
			PostInstall: gen["postinst"],
			PreRemove:   gen["prerm"],
			PostRemove:  gen["postrm"],
		},
		Deb: nfpm.Deb{Compression: "xz"},
	}
	rpmInfo := base
	rpmInfo.Overridables = nfpm.Overridables{
		Depends:  []string{"glibc >= " + libc, "systemd", "dbus"},
		Contents: contents("rpm"),
		Scripts: nfpm.Scripts{
			PostInstall: gen["rpm-post"],
			PreRemove:   gen["rpm-preun"],
			PostRemove:  gen["rpm-postun"],
		},
		RPM: nfpm.RPM{
			Summary:     "Run jobs as transient systemd units",
			Group:       "System Environment/Daemons",
			BuildHost:   "unitvisor-build", // not the machine's name: reproducible
			Compression: "xz",
		},
	}
	// The RPM carries the long description only.
	rpmInfo.Description = description[strings.Index(description, "\n")+2:]
	rpmInfo.Description = strings.ReplaceAll(strings.ReplaceAll(rpmInfo.Description, "\n .\n", "\n\n"), "\n ", "\n")

	var out []string
	for _, p := range []struct {
		format string
		info   nfpm.Info
		pkgr   nfpm.Packager
	}{{"deb", debInfo, deb.Default}, {"rpm", rpmInfo, rpm.DefaultRPM}} {
		info := nfpm.WithDefaults(&p.info)
		if err := nfpm.PrepareForPackager(info, p.format); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", p.format, err)
		}
		path := filepath.Join(b.Out, p.pkgr.ConventionalFileName(info))
		if err := writePackage(path, p.pkgr, info); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

func file(src, dst string, mode os.FileMode, typ string) *files.Content {
	return &files.Content{Source: src, Destination: dst, Type: typ,
		FileInfo: &files.ContentFileInfo{Mode: mode, Owner: "root", Group: "root"}}
}

func writePackage(path string, p nfpm.Packager, info *nfpm.Info) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := p.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("package %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// generate writes every file the packages take from stage into it and
// returns their paths by name: the static ones as they are, the man page
// from the binary's help, the copyright and changelog.
func (b Build) generate(stage string) (map[string]string, error) {
	gen := map[string]string{}
	put := func(name string, data []byte, mode os.FileMode) error {
		p := filepath.Join(stage, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
		// WriteFile's mode is masked by the umask; the packages must not be.
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		gen[name] = p
		return nil
	}
	entries, err := static.ReadDir("files")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := static.ReadFile("files/" + e.Name())
		if err != nil {
			return nil, err
		}
		mode := os.FileMode(0o644)
		if bytes.HasPrefix(data, []byte("#!")) {
			mode = 0o755
		}
		if err := put(e.Name(), data, mode); err != nil {
			return nil, err
		}
	}

	help, err := exec.Command(b.Bin, "help").Output()
	if err != nil {
		return nil, fmt.Errorf("%s help: %w", b.Bin, err)
	}
	man, err := gzip9n(Manpage(string(help), b.Time))
	if err != nil {
		return nil, err
	}
	if err := put("unitvisor.1.gz", man, 0o644); err != nil {
		return nil, err
	}

	cr, err := Copyright(b.Bin, b.GoRoot, b.ModCache, b.Licence, b.Time.UTC().Year())
	if err != nil {
		return nil, err
	}
	if err := put("copyright", cr, 0o644); err != nil {
		return nil, err
	}

	cl, err := gzip9n(Changelog(b.Version, b.Describe, b.Maintainer, b.Time))
	if err != nil {
		return nil, err
	}
	if err := put("changelog.gz", cl, 0o644); err != nil {
		return nil, err
	}
	return gen, nil
}

// Changelog is the Debian changelog of a native package: one entry for
// this build. The history of changes is the project's git log.
func Changelog(version, describe, maintainer string, at time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "unitvisor (%s) unstable; urgency=medium\n\n", version)
	fmt.Fprintf(&b, "  * Built from %s.\n", strings.TrimSpace(cmpOr(describe, "an unknown revision")))
	fmt.Fprintf(&b, "  * The changes are in the project's git history.\n\n")
	fmt.Fprintf(&b, " -- %s  %s\n", maintainer, at.UTC().Format(time.RFC1123Z))
	return b.Bytes()
}

func cmpOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// gzip9n compresses like `gzip -9n`: best compression, no name, no time.
func gzip9n(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var glibcSym = regexp.MustCompile(`^GLIBC_([0-9]+)\.([0-9]+)(?:\.([0-9]+))?$`)

// glibcVersion is the newest GLIBC_x.y symbol version the binary needs:
// the minimum libc it runs with. A static binary needs none ("2.0").
func glibcVersion(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", bin, err)
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil && err != elf.ErrNoSymbols {
		return "", fmt.Errorf("symbols of %s: %w", bin, err)
	}
	best := [3]int{2, 0, 0}
	for _, s := range syms {
		m := glibcSym.FindStringSubmatch(s.Version)
		if m == nil {
			continue
		}
		var v [3]int
		for i := range 3 {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		if v[0] > best[0] || v[0] == best[0] && (v[1] > best[1] || v[1] == best[1] && v[2] > best[2]) {
			best = v
		}
	}
	s := fmt.Sprintf("%d.%d", best[0], best[1])
	if best[2] > 0 {
		s += fmt.Sprintf(".%d", best[2])
	}
	return s, nil
}
