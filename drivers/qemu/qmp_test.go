package qemu

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQMP answers like qemu and closes the connection after powerdown when
// obey is set.
func fakeQMP(t *testing.T, obey bool) string {
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(`{"return": {}}` + "\n"))
			if strings.Contains(line, "system_powerdown") {
				c.Write([]byte(`{"event": "POWERDOWN", "data": {}}` + "\n"))
				if obey {
					return
				}
			}
		}
	}()
	return sock
}

func TestPowerdown(t *testing.T) {
	for _, obey := range []bool{true, false} {
		var log strings.Builder
		start := time.Now()
		if err := Powerdown(context.Background(), fakeQMP(t, obey), 500*time.Millisecond, &log); err != nil {
			t.Fatal(err)
		}
		out := log.String()
		if !strings.Contains(out, `qmp> {"execute":"system_powerdown"}`) || !strings.Contains(out, `qmp< {"return": {}}`) {
			t.Fatalf("exchange not logged:\n%s", out)
		}
		if obey != strings.Contains(out, "has shut down") {
			t.Fatalf("obey=%v:\n%s", obey, out)
		}
		if !obey && time.Since(start) < 400*time.Millisecond {
			t.Fatal("did not wait for the timeout")
		}
	}
}
