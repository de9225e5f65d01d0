//go:build integration

package units

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// The watcher's bus connection is cut under it (as a bus restart would):
// it must redial, resubscribe, re-list, and go on seeing units.
func TestWatcherRedialsWhenTheBusDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := Dial(ctx, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	namer := Namer{Prefix: "redial"}
	t.Cleanup(func() {
		exec.Command("systemctl", "stop", "redial-*").Run()
	})
	w := NewWatcher(conn, namer, time.Hour, testLogger(t))
	var mu sync.Mutex
	var buses []*dbus.Conn
	w.dialBus = func() (*dbus.Conn, error) {
		b, err := systemBus()
		mu.Lock()
		buses = append(buses, b)
		mu.Unlock()
		return b, err
	}
	go w.Run(ctx)
	<-w.Synced()
	mu.Lock()
	buses[0].Close()
	mu.Unlock()

	name, _ := namer.Name("bus", "drop", 0)
	if err := conn.Start(ctx, Spec{Name: name, Properties: []Property{
		String("Type", "exec"), ExecStart([]string{"/bin/sleep", "60"}),
	}}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s, ok := w.Get(name); ok && s.Running() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watcher did not see the unit after its bus dropped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(buses) < 2 {
		t.Fatalf("watcher dialled %d times, want a redial", len(buses))
	}
}
