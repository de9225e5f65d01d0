//go:build integration

package units_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
	"github.com/unitvisor/unitvisor/units"
)

type recorder struct {
	mu      sync.Mutex
	calls   []string
	errs    int
	redials []string
}

func (r *recorder) DBusCall(method string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method)
	if err != nil {
		r.errs++
	}
}

func (r *recorder) DBusReconnect(connection string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redials = append(r.redials, connection)
}

// TestObserverSeesEveryCall: each method call of a Conn reaches its
// observer under its D-Bus member name, errors included.
func TestObserverSeesEveryCall(t *testing.T) {
	conn := sdtest.Conn(t)
	namer := sdtest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// sdtest.Conn dials with a context that has ended since: the
	// connection must have outlived it (no reconnect below).
	rec := &recorder{}
	conn.SetObserver(rec)
	defer conn.SetObserver(nil)
	name, _ := namer.Name("obs", "t", 0)
	spec := units.Spec{Name: name, Properties: []units.Property{
		units.String("Type", "exec"),
		units.String("Slice", "unitvisor-test.slice"),
		units.ExecStart([]string{"/bin/sleep", "30"}),
	}}
	if err := conn.Start(ctx, spec, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Fetch(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.List(ctx, namer.Pattern()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Property(ctx, name+".nope", "Service", "NRestarts"); err == nil {
		t.Fatal("reading a property of a unit type that does not exist worked")
	}
	if err := conn.Stop(ctx, name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range []string{"StartTransientUnit", "GetAll", "ListUnitsByPatterns", "Get", "StopUnit", "ResetFailedUnit"} {
		if !slices.Contains(rec.calls, m) {
			t.Errorf("no %s in the observed calls %v", m, rec.calls)
		}
		if !slices.Contains(units.Methods(), m) {
			t.Errorf("%s is not in units.Methods()", m)
		}
	}
	if rec.errs == 0 {
		t.Errorf("the failed Get was not reported as an error: %v", rec.calls)
	}
	if len(rec.redials) != 0 {
		t.Errorf("reconnects without a lost bus: %v in %v", rec.redials, rec.calls)
	}
}
