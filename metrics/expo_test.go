package metrics_test

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// ours keeps the unitvisor_ families of an exposition (HELP, TYPE and
// samples), dropping the Go, process and promhttp ones whose values and
// even names change with the Go and library versions.
func ours(expo string) string {
	var b strings.Builder
	s := bufio.NewScanner(strings.NewReader(expo))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		name := line
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
			name = f[2]
		}
		if strings.HasPrefix(name, "unitvisor_") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// normalise replaces the value of samples of the volatile families (and of
// their _bucket, _sum and _count series) with "<v>".
func normalise(expo string, volatile ...string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(expo, "\n") {
		m := sampleRE.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m != nil {
			for _, v := range volatile {
				if strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count") == v || m[1] == v {
					line = m[1] + m[2] + " <v>\n"
					break
				}
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", path, diff(string(want), got))
	}
}

// diff lists the lines only in want (-) and only in got (+).
func diff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// sample returns the value of the sample with exactly this name and
// label text (e.g. `{job="web"}`), or "" if there is none.
func sample(expo, name, labels string) string {
	for _, line := range strings.Split(expo, "\n") {
		m := sampleRE.FindStringSubmatch(line)
		if m != nil && m[1] == name && m[2] == labels {
			return m[3]
		}
	}
	return ""
}
