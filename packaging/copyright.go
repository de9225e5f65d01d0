package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"unicode"
)

// Licence is a licence text with its DEP-5 short name.
type Licence struct {
	Name string
	Text string // empty: the name refers to /usr/share/common-licenses
}

// commonLicences are the texts Debian ships in /usr/share/common-licenses,
// which a copyright file must refer to rather than copy.
var commonLicences = map[string]bool{"Apache-2.0": true, "MPL-2.0": true}

// DetectLicence names a licence text by its wording.
func DetectLicence(text string) Licence {
	flat := strings.Join(strings.Fields(text), " ")
	has := func(s string) bool { return strings.Contains(flat, s) }
	var name string
	switch {
	case has("Apache License") && has("Version 2.0"):
		name = "Apache-2.0"
	case has("Mozilla Public License Version 2.0"), has("Mozilla Public License, version 2.0"):
		name = "MPL-2.0"
	case has("Permission is hereby granted, free of charge"):
		name = "Expat"
	case has("Redistribution and use in source and binary forms") && has("Neither the name"):
		name = "BSD-3-clause"
	case has("Redistribution and use in source and binary forms"):
		name = "BSD-2-clause"
	case has("Permission to use, copy, modify, and/or distribute"), has("Permission to use, copy, modify, and distribute"):
		name = "ISC"
	default:
		return Licence{Name: "other", Text: text}
	}
	if commonLicences[name] {
		return Licence{Name: name}
	}
	return Licence{Name: name, Text: text}
}

var copyrightLine = regexp.MustCompile(`(?i)^\s*(?:copyright|\(c\)|©)[\s:]*(?:\(c\)|©)?\s*([0-9].*)$`)

// holders returns the "Copyright ..." lines of a licence text, without the
// word itself.
func holders(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if m := copyrightLine.FindStringSubmatch(l); m != nil {
			h := strings.TrimSpace(m[1])
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// Copyright renders /usr/share/doc/unitvisor/copyright in the
// machine-readable format: unitvisor's own stanza, then one for the Go
// standard library and each Go module compiled into bin, with the licence
// read from the module cache (so the file follows go.mod by itself).
func Copyright(bin, goroot, modcache string, own Licence, year int) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read build info of %s: %w", bin, err)
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
	fmt.Fprintln(&b, "Upstream-Name: unitvisor")
	fmt.Fprintln(&b, "Comment: /usr/bin/unitvisor is a Go program: the standard library and the")
	fmt.Fprintln(&b, " Go modules below are compiled into it. Their stanzas name each module and")
	fmt.Fprintln(&b, " version and carry the licence from that module's source.")
	fmt.Fprintln(&b)
	stanza(&b, "*", []string{fmt.Sprintf("%d The unitvisor authors", year)}, "", own)

	std, err := os.ReadFile(filepath.Join(goroot, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("licence of the Go standard library: %w", err)
	}
	stanza(&b, "go/*", holders(string(std)), "The Go standard library, "+bi.GoVersion+".", DetectLicence(string(std)))

	deps := slices.Clone(bi.Deps)
	slices.SortFunc(deps, func(a, b *debug.Module) int { return strings.Compare(a.Path, b.Path) })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		text, err := moduleLicence(modcache, m.Path, m.Version)
		if err != nil {
			return nil, err
		}
		h := holders(text)
		if len(h) == 0 {
			h = []string{"The authors of " + m.Path}
		}
		stanza(&b, m.Path+"/*", h, "Go module "+m.Path+" "+m.Version+".", DetectLicence(text))
	}
	return b.Bytes(), nil
}

func stanza(b *bytes.Buffer, files string, holders []string, comment string, l Licence) {
	fmt.Fprintf(b, "Files: %s\n", files)
	fmt.Fprintf(b, "Copyright: %s\n", strings.Join(holders, "\n "))
	if comment != "" {
		fmt.Fprintf(b, "Comment: %s\n", comment)
	}
	fmt.Fprintf(b, "License: %s\n", l.Name)
	if l.Text == "" {
		fmt.Fprintf(b, " On Debian systems, the full text of the %s licence is in\n", l.Name)
		fmt.Fprintf(b, " /usr/share/common-licenses/%s.\n", l.Name)
	} else {
		b.WriteString(indent(l.Text))
	}
	b.WriteString("\n")
}

// indent formats a text as a DEP-5 field continuation: each line indented
// by one space, empty lines as " .".
func indent(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(text, "\r", "")), "\n") {
		l = strings.TrimRightFunc(strings.ReplaceAll(l, "\t", "    "), unicode.IsSpace)
		if l == "" {
			b.WriteString(" .\n")
		} else {
			b.WriteString(" " + l + "\n")
		}
	}
	return b.String()
}

// moduleLicence reads a module's licence file from the module cache.
func moduleLicence(modcache, path, version string) (string, error) {
	dir := filepath.Join(modcache, escapeModule(path)+"@"+escapeModule(version))
	var names []string
	for _, pat := range []string{"LICENSE*", "LICENCE*", "COPYING*", "License*", "license*"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		names = append(names, m...)
	}
	slices.Sort(names)
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && fi.Mode().IsRegular() {
			b, err := os.ReadFile(n)
			if err != nil {
				return "", fmt.Errorf("licence of %s %s: %w", path, version, err)
			}
			return string(b), nil
		}
	}
	return "", fmt.Errorf("licence of %s %s: no licence file in %s (is the module downloaded? go mod download)", path, version, dir)
}

// escapeModule applies the module cache's case encoding: an upper-case
// letter becomes "!" and its lower-case form.
func escapeModule(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteRune('!')
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
