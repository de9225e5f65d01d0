// Command packaging builds unitvisor's .deb and .rpm with nfpm (as a
// library): the binary, the agent's systemd unit, its default
// configuration, the maintainer scripts, a man page generated from
// `unitvisor help`, bash completion, and the Debian copyright and
// changelog. `make package` calls it; it is a module of its own so that
// nfpm's dependencies stay out of the agent's.
//
//	packaging version -describe "$(git describe --tags --always --dirty)" -epoch N
//	packaging build -bin PATH -version V -describe D -epoch N -out DIR
//
// Every timestamp in the packages is the -epoch (SOURCE_DATE_EPOCH), so
// two builds of the same tree give identical files.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: packaging version|build [flags]")
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	describe := fs.String("describe", "", "git describe --tags --always --dirty")
	epoch := fs.Int64("epoch", -1, "SOURCE_DATE_EPOCH: the commit time, used for every timestamp")
	switch args[0] {
	case "version":
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		v, err := PackageVersion(*describe, time.Unix(*epoch, 0))
		if err != nil {
			fmt.Fprintln(stderr, "packaging:", err)
			return 1
		}
		fmt.Fprintln(stdout, v)
		return 0
	case "build":
		bin := fs.String("bin", "", "the unitvisor binary")
		version := fs.String("version", "", "package version (from `packaging version`)")
		out := fs.String("out", "dist", "output directory")
		maintainer := fs.String("maintainer", "unitvisor developers <unitvisor@users.noreply.github.com>", "Maintainer field")
		licence := fs.String("licence", "", "unitvisor's licence file (empty: none yet)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if *bin == "" || *version == "" || *epoch < 0 {
			fmt.Fprintln(stderr, "packaging build: -bin, -version and -epoch are required")
			return 2
		}
		b := Build{Bin: *bin, Version: *version, Describe: *describe, Time: time.Unix(*epoch, 0).UTC(),
			Maintainer: *maintainer, Out: *out}
		var err error
		if b.GoRoot, err = goEnv("GOROOT"); err != nil {
			fmt.Fprintln(stderr, "packaging:", err)
			return 1
		}
		if b.ModCache, err = goEnv("GOMODCACHE"); err != nil {
			fmt.Fprintln(stderr, "packaging:", err)
			return 1
		}
		b.Licence = Licence{Name: "unitvisor", Text: "unitvisor does not carry a licence file yet. Until it does, all rights\nare reserved by its authors."}
		if *licence != "" {
			text, err := os.ReadFile(*licence)
			if err != nil {
				fmt.Fprintln(stderr, "packaging:", err)
				return 1
			}
			b.Licence = DetectLicence(string(text))
		}
		paths, err := b.Packages()
		if err != nil {
			fmt.Fprintln(stderr, "packaging:", err)
			return 1
		}
		for _, p := range paths {
			fmt.Fprintln(stdout, p)
		}
		return 0
	}
	fmt.Fprintf(stderr, "packaging: unknown command %q\n", args[0])
	return 2
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
