package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

// overstrike matches grotty's bold and underline ("X\bX", "_\bX").
var overstrike = regexp.MustCompile(".\x08")

var at = time.Date(2026, 11, 30, 11, 57, 3, 0, time.UTC)

func TestManpageGolden(t *testing.T) {
	help, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "unitvisor.1.golden", Manpage(string(help), at))
}

// The page must be valid roff: groff reports no warning, and man renders
// every command of the help text.
func TestManpageRenders(t *testing.T) {
	help, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "unitvisor.1")
	if err := os.WriteFile(page, Manpage(string(help), at), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", page)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	cmd = exec.Command("man", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MAN_KEEP_FORMATTING=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("man -l: %v", err)
	}
	text := overstrike.ReplaceAllString(string(out), "")
	for _, want := range []string{"agent [-config FILE]", "job run [-detach] FILE", "validate FILE",
		"/etc/unitvisor/agent.hcl", "$UNITVISOR_SOCKET"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, text)
		}
	}
}

func TestManpageLooseHelp(t *testing.T) {
	// Text it does not recognise becomes description, not lost.
	page := string(Manpage("something changed\n\n.dangerous line\n", at))
	if !strings.Contains(page, `\&.dangerous line`) || !strings.Contains(page, "something changed") {
		t.Fatalf("unexpected page:\n%s", page)
	}
}
