package main

import (
	"testing"
	"time"
)

func TestPackageVersion(t *testing.T) {
	at := time.Date(2026, 11, 30, 11, 57, 3, 0, time.UTC)
	for _, tc := range []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234.dirty"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-rc.1-2-gabc1234", "1.2.3~rc.1+2.gabc1234"},
		{"v2", "2"},
		{"00d6440", "0.0.0+git20261130115703.g00d6440"},
		{"00d6440-dirty", "0.0.0+git20261130115703.g00d6440.dirty"},
		{"", "0.0.0+unknown"},
		{"dev", "0.0.0+unknown"},
		{" v1.0.0\n", "1.0.0"},
	} {
		got, err := PackageVersion(tc.in, at)
		if err != nil || got != tc.want {
			t.Errorf("PackageVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"release-2024", "v1.2.3 beta", "vX", "xyz-12"} {
		if got, err := PackageVersion(bad, at); err == nil {
			t.Errorf("PackageVersion(%q) = %q, want an error", bad, got)
		}
	}
}
