package supervisor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/units"
)

// Run calls Heartbeat from its loop once ready, on its period, and never
// before the first reconcile is done (the systemd watchdog ping).
func TestRunHeartbeat(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	var beats atomic.Int32
	var beatsAtReady int32 = -1
	s.cfg.Heartbeat = func() { beats.Add(1) }
	s.cfg.HeartbeatEvery = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, make(chan units.Event), func() { beatsAtReady = beats.Load() })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for beats.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := beats.Load(); n < 3 {
		t.Fatalf("%d heartbeats in 10s", n)
	}
	if beatsAtReady != 0 {
		t.Fatalf("%d heartbeats before ready", beatsAtReady)
	}
	after := beats.Load()
	time.Sleep(20 * time.Millisecond)
	if beats.Load() != after {
		t.Fatal("heartbeats after Run returned")
	}
}

// slowStop is a systemd whose stops take a while, like a task ignoring
// SIGTERM until its kill_timeout.
type slowStop struct {
	*fakeSystemd
	wait time.Duration
}

func (s slowStop) Stop(ctx context.Context, name string, d time.Duration) error {
	time.Sleep(s.wait)
	return s.fakeSystemd.Stop(ctx, name, d)
}

// A job stop that waits on slow stop jobs keeps the watchdog fed.
func TestHeartbeatWhileStopping(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	submit(t, s, jobSrc("600", 1))
	s.sd = slowStop{sd, 300 * time.Millisecond}
	var beats atomic.Int32
	s.cfg.Heartbeat = func() { beats.Add(1) }
	s.cfg.HeartbeatEvery = 20 * time.Millisecond
	s.ready.Store(true)
	if err := s.StopJob(context.Background(), "web", false); err != nil {
		t.Fatal(err)
	}
	if n := beats.Load(); n < 5 {
		t.Fatalf("%d heartbeats during a 300ms stop, want about 15", n)
	}
}
