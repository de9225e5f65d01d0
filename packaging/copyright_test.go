package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetectLicence(t *testing.T) {
	for _, tc := range []struct{ text, name string }{
		{"Apache License\n Version 2.0, January 2004", "Apache-2.0"},
		{"Mozilla Public License Version 2.0\n====", "MPL-2.0"},
		{"Permission is hereby granted, free of charge, to any person", "Expat"},
		{"Redistribution and use in source and binary forms ... Neither the name of", "BSD-3-clause"},
		{"Redistribution and use in source and binary forms, with or without", "BSD-2-clause"},
		{"Permission to use, copy, modify, and/or distribute this software", "ISC"},
		{"Do what you want.", "other"},
	} {
		l := DetectLicence(tc.text)
		if l.Name != tc.name {
			t.Errorf("DetectLicence(%q) = %q, want %q", tc.text, l.Name, tc.name)
		}
		// Debian ships the long ones: refer to them, do not copy them.
		if commonLicences[l.Name] != (l.Text == "") {
			t.Errorf("%s: text kept %v", l.Name, l.Text != "")
		}
	}
}

func TestHoldersAndIndent(t *testing.T) {
	text := "The MIT License\n\nCopyright (c) 2015 Jane Doe\nCopyright 2016-2018 ACME Inc.\n\n\tPermission is hereby granted\r\n"
	if got := holders(text); strings.Join(got, "|") != "2015 Jane Doe|2016-2018 ACME Inc." {
		t.Errorf("holders = %q", got)
	}
	want := " The MIT License\n .\n Copyright (c) 2015 Jane Doe\n Copyright 2016-2018 ACME Inc.\n .\n     Permission is hereby granted\n"
	if got := indent(text); got != want {
		t.Errorf("indent:\n%q\nwant\n%q", got, want)
	}
}

func TestEscapeModule(t *testing.T) {
	if got := escapeModule("github.com/BurntSushi/toml"); got != "github.com/!burnt!sushi/toml" {
		t.Errorf("escapeModule = %q", got)
	}
}

// Every module compiled into a binary gets a stanza with its licence from
// the module cache; a module without one fails the build.
func TestCopyrightOfThisPackager(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "packaging")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	goroot, err := goEnv("GOROOT")
	if err != nil {
		t.Fatal(err)
	}
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := Copyright(bin, goroot, modcache, Licence{Name: "Expat", Text: "Permission is hereby granted"}, 2026)
	if err != nil {
		t.Fatal(err)
	}
	s := string(cr)
	for _, want := range []string{
		"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n",
		"Files: *\nCopyright: 2026 The unitvisor authors\nLicense: Expat\n",
		"Files: go/*\n",
		"Files: github.com/goreleaser/nfpm/v2/*\n",
		"License: Expat\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("copyright lacks %q", want)
		}
	}
	if _, err := Copyright(bin, goroot, t.TempDir(), Licence{Name: "Expat"}, 2026); err == nil {
		t.Error("an empty module cache gave no error")
	}
	_ = os.Remove(bin)
}
