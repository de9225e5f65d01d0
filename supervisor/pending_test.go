package supervisor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/drivers"
	"github.com/unitvisor/unitvisor/units"
)

// fetchingDriver is not ready until ready is closed, then fails with err
// once, then starts.
type fetchingDriver struct {
	mu    sync.Mutex
	ready chan struct{}
	err   error
}

func (*fetchingDriver) Name() string { return "exec" }

func (d *fetchingDriver) Prepare(_ context.Context, in drivers.Instance) (units.Spec, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.ready:
	default:
		return units.Spec{}, &drivers.NotReadyError{Progress: func() string { return "pulling image x: 1.0/2.0 MiB" }, Ready: d.ready}
	}
	if err := d.err; err != nil {
		d.err = nil
		return units.Spec{}, err
	}
	return units.Spec{Name: in.Unit}, nil
}

// TestNotReady: an instance whose driver is fetching is pending with the
// fetch's progress, a reconcile follows the end of the fetch by itself,
// a failed fetch shows as an error, and the next try starts the unit.
func TestNotReady(t *testing.T) {
	sd := newFake()
	s := newSup(t, t.TempDir(), sd)
	d := &fetchingDriver{ready: make(chan struct{}), err: errors.New("pull image x: refused")}
	s.cfg.Drivers = map[string]Driver{"exec": d}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	submit(t, s, jobSrc("1", 1))
	st, err := s.Status("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range st.Instances {
		if in.Status != StatusPending || in.Detail != "pulling image x: 1.0/2.0 MiB" {
			t.Fatalf("%s: %s (%s), want pending with the progress", in.Unit, in.Status, in.Detail)
		}
	}
	wantCalls(t, sd)
	select { // Submit's own kick
	case <-s.kick:
	default:
	}
	close(d.ready)
	select {
	case <-s.kick:
	case <-time.After(5 * time.Second):
		t.Fatal("no reconcile asked for when the fetch ended")
	}
	if err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Status("web")
	errored := 0
	for _, in := range st.Instances {
		if in.Status == StatusError && in.Detail == "prepare "+in.Unit+": pull image x: refused" {
			errored++
		}
	}
	if errored != 1 {
		t.Fatalf("want one instance in error with the fetch's error: %+v", st.Instances)
	}
	if err := s.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Status("web")
	for _, in := range st.Instances {
		if in.Status != StatusRunning {
			t.Fatalf("%s: %s (%s), want running", in.Unit, in.Status, in.Detail)
		}
	}
}
