//go:build integration

package units

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// daemon-reload sends UnitRemoved for every unit (systemd frees and
// recreates them): the watcher must not report running units as gone, and
// must still report a unit that really goes.
func TestWatcherSurvivesDaemonReload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := Dial(ctx, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	namer := Namer{Prefix: "reload"}
	t.Cleanup(func() { exec.Command("systemctl", "stop", "reload-*").Run() })
	w := NewWatcher(conn, namer, time.Hour, testLogger(t))
	go w.Run(ctx)
	<-w.Synced()
	name, _ := namer.Name("keep", "me", 0)
	if err := conn.Start(ctx, Spec{Name: name, Properties: []Property{
		String("Type", "exec"), ExecStart([]string{"/bin/sleep", "60"}),
	}}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for st := range w.Events() {
		if st.Name == name && st.Running() {
			break
		}
	}
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	if err := conn.Stop(ctx, name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Events come in order: a Gone before the stop's states is the bug.
	for st := range w.Events() {
		if st.Name != name {
			continue
		}
		if st.Gone {
			if st.ActiveState == "active" {
				t.Fatal("daemon-reload made the watcher report a running unit as gone")
			}
			break
		}
	}
	if _, ok := w.Get(name); ok {
		t.Fatal("a stopped unit is still cached")
	}
}
