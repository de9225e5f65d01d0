package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeUnitvisor builds a stand-in binary that prints a help text, so the
// packager can be tested without the agent's module.
func fakeUnitvisor(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"usage: unitvisor <command> [flags]\\n\\ncommands:\\n  version   print the version\\n\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fake\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "unitvisor")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Two runs on the same input give the same bytes (SOURCE_DATE_EPOCH), and
// the file names follow each format's convention.
func TestPackagesReproducible(t *testing.T) {
	bin := fakeUnitvisor(t)
	goroot, _ := goEnv("GOROOT")
	modcache, _ := goEnv("GOMODCACHE")
	build := func() []string {
		b := Build{Bin: bin, Version: "1.2.3+4.gabc", Describe: "v1.2.3-4-gabc", Time: at,
			Maintainer: "Test <test@example.org>", Licence: Licence{Name: "Expat", Text: "x"},
			GoRoot: goroot, ModCache: modcache, Out: t.TempDir()}
		paths, err := b.Packages()
		if err != nil {
			t.Fatal(err)
		}
		return paths
	}
	first := build()
	time.Sleep(1100 * time.Millisecond) // a clock leaking in would show
	second := build()
	if len(first) != 2 {
		t.Fatalf("packages: %v", first)
	}
	for i := range first {
		if filepath.Base(first[i]) != filepath.Base(second[i]) {
			t.Fatalf("names differ: %s %s", first[i], second[i])
		}
		a, _ := os.ReadFile(first[i])
		b, _ := os.ReadFile(second[i])
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: two builds differ (%d and %d bytes)", filepath.Base(first[i]), len(a), len(b))
		}
	}
	if got := filepath.Base(first[0]); got != "unitvisor_1.2.3+4.gabc_amd64.deb" {
		t.Errorf("deb name %s", got)
	}
	if got := filepath.Base(first[1]); got != "unitvisor-1.2.3+4.gabc-1.x86_64.rpm" {
		t.Errorf("rpm name %s", got)
	}
}

func TestChangelog(t *testing.T) {
	got := string(Changelog("1.2.3", "v1.2.3", "A <a@example.org>", at))
	want := "unitvisor (1.2.3) unstable; urgency=medium\n\n  * Built from v1.2.3.\n" +
		"  * The changes are in the project's git history.\n\n -- A <a@example.org>  Mon, 30 Nov 2026 11:57:03 +0000\n"
	if got != want {
		t.Errorf("changelog:\n%s\nwant\n%s", got, want)
	}
}

// The scripts are shell scripts that sh can parse.
func TestScriptsParse(t *testing.T) {
	for _, name := range []string{"postinst", "prerm", "postrm", "rpm-post", "rpm-preun", "rpm-postun"} {
		data, err := static.ReadFile("files/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "#!/bin/sh\n") {
			t.Errorf("%s: no #!/bin/sh", name)
		}
		cmd := exec.Command("sh", "-n")
		cmd.Stdin = bytes.NewReader(data)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", name, err, out)
		}
	}
}
