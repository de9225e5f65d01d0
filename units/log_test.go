package units

import (
	"log/slog"
	"strings"
	"testing"
)

type tw struct{ t testing.TB }

func (w tw) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tw{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
