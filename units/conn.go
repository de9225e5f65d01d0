package units

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Conn talks to the system manager over the system bus. It redials when
// the bus connection drops (a daemon-reexec closes every connection).
type Conn struct {
	log  *slog.Logger
	dial func(ctx context.Context) (*sddbus.Conn, error)

	mu      sync.Mutex
	c       *sddbus.Conn
	version int

	obs atomic.Pointer[Observer]
}

// Observer is told about the bus traffic of a Conn and its Watcher, e.g.
// by metrics. Calls come from many goroutines and must not block.
type Observer interface {
	// DBusCall reports one method call to the manager (method is the
	// D-Bus member, e.g. "StartTransientUnit") and how long it took.
	DBusCall(method string, d time.Duration, err error)
	// DBusReconnect reports a new bus connection after a lost one;
	// connection is "calls" (the Conn) or "signals" (a Watcher).
	DBusReconnect(connection string)
}

// Methods are the D-Bus members a Conn calls, as reported to an Observer.
func Methods() []string {
	return []string{"StartTransientUnit", "StopUnit", "KillUnit", "ResetFailedUnit", "ListUnitsByPatterns", "GetAll", "Get"}
}

// SetObserver sets who is told about D-Bus calls and reconnects (nil: no
// one). Set it before the Conn is shared.
func (c *Conn) SetObserver(o Observer) {
	if o == nil {
		c.obs.Store(nil)
		return
	}
	c.obs.Store(&o)
}

func (c *Conn) observer() Observer {
	if p := c.obs.Load(); p != nil {
		return *p
	}
	return nil
}

// Dial connects to the system bus and reads the manager's version.
func Dial(ctx context.Context, log *slog.Logger) (*Conn, error) {
	c := &Conn{log: log, dial: sddbus.NewSystemConnectionContext}
	if _, err := c.conn(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Version is the manager's major version (e.g. 252).
func (c *Conn) Version() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Close drops the connection.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// conn returns a live connection, redialling with backoff until ctx ends.
func (c *Conn) conn(ctx context.Context) (*sddbus.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil && c.c.Connected() {
		return c.c, nil
	}
	redial := c.c != nil
	if redial {
		c.c.Close()
		c.c = nil
	}
	backoff := 50 * time.Millisecond
	for {
		// godbus closes a connection when the context it was dialled
		// with ends: the connection must outlive the call (an API
		// request's context) that happened to dial it.
		sd, err := c.dial(context.WithoutCancel(ctx))
		if err == nil {
			v, verr := sd.GetManagerProperty("Version")
			if verr == nil {
				c.c, c.version = sd, parseVersion(v)
				if redial {
					c.log.Info("reconnected to systemd", "version", c.version)
					if obs := c.observer(); obs != nil {
						obs.DBusReconnect("calls")
					}
				}
				return sd, nil
			}
			sd.Close()
			err = verr
		}
		c.log.Warn("connect to systemd", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to systemd: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// call runs fn, which makes the D-Bus call method, on a live connection;
// when the connection turns out to be dead it redials and runs fn once
// more. Each attempt is reported to the observer.
func (c *Conn) call(ctx context.Context, method string, fn func(*sddbus.Conn) error) error {
	obs := c.observer()
	for attempt := 0; ; attempt++ {
		sd, err := c.conn(ctx)
		if err != nil {
			return err
		}
		began := time.Now()
		err = fn(sd)
		if obs != nil {
			obs.DBusCall(method, time.Since(began), err)
		}
		if err == nil || sd.Connected() || attempt > 0 {
			return err
		}
	}
}

// IsDBusError reports whether err is the named D-Bus error.
func IsDBusError(err error, name string) bool {
	var de dbus.Error
	if errors.As(err, &de) {
		return de.Name == name
	}
	var dep *dbus.Error
	return errors.As(err, &dep) && dep.Name == name
}

const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
	errNotLoaded  = "org.freedesktop.systemd1.LoadFailed"
)

// Start creates and starts a transient unit and waits, at most timeout, for
// its start job. With Type=exec a missing binary fails here. A leftover
// unit of the same name (failed, not yet collected) is reset and the start
// retried once.
func (c *Conn) Start(ctx context.Context, spec Spec, timeout time.Duration) error {
	if err := checkVersion(c.Version(), spec.Properties); err != nil {
		return fmt.Errorf("start unit %s: %w", spec.Name, err)
	}
	ch := make(chan string, 1) // buffered: go-systemd blocks its dispatcher on a full channel
	start := func() error {
		return c.call(ctx, "StartTransientUnit", func(sd *sddbus.Conn) error {
			_, err := sd.StartTransientUnitContext(ctx, spec.Name, "fail", spec.Properties, ch)
			return err
		})
	}
	err := start()
	if IsDBusError(err, errUnitExists) {
		// A failed unit of that name is still loaded: reset it, which lets
		// systemd collect it, then retry (collection is not synchronous).
		if rerr := c.ResetFailed(ctx, spec.Name); rerr != nil {
			c.log.Debug("reset-failed before retry", "unit", spec.Name, "err", rerr)
		}
		for range 40 {
			if err = start(); !IsDBusError(err, errUnitExists) {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	if err != nil {
		return fmt.Errorf("start unit %s: %w", spec.Name, err)
	}
	res, err := waitJob(ctx, ch, timeout)
	if err != nil {
		return fmt.Errorf("start unit %s: %w", spec.Name, err)
	}
	if res != "done" {
		st, ferr := c.Fetch(ctx, spec.Name)
		if ferr == nil && st.Exit() != "" {
			return fmt.Errorf("start unit %s: job %s (%s, result %s)", spec.Name, res, st.Exit(), st.Result)
		}
		return fmt.Errorf("start unit %s: job %s", spec.Name, res)
	}
	return nil
}

func waitJob(ctx context.Context, ch <-chan string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-ch:
		return res, nil
	case <-t.C:
		return "", fmt.Errorf("job did not finish within %s", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Stop stops a unit and waits for it. systemd sends the unit's KillSignal
// and, after its TimeoutStopUSec, SIGKILL; wait bounds how long we wait
// before sending SIGKILL ourselves. A unit that does not exist is already
// stopped. Afterwards the unit's failed state is reset so it is collected.
func (c *Conn) Stop(ctx context.Context, name string, wait time.Duration) error {
	ch := make(chan string, 1)
	err := c.call(ctx, "StopUnit", func(sd *sddbus.Conn) error {
		_, err := sd.StopUnitContext(ctx, name, "replace", ch)
		return err
	})
	if IsDBusError(err, errNoSuchUnit) || IsDBusError(err, errNotLoaded) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop unit %s: %w", name, err)
	}
	if _, err := waitJob(ctx, ch, wait); err != nil {
		c.log.Warn("stop did not finish, sending SIGKILL", "unit", name, "err", err)
		if kerr := c.Kill(ctx, name, syscall.SIGKILL); kerr != nil {
			return fmt.Errorf("stop unit %s: %w; SIGKILL: %v", name, err, kerr)
		}
		if _, err := waitJob(ctx, ch, 10*time.Second); err != nil {
			return fmt.Errorf("stop unit %s after SIGKILL: %w", name, err)
		}
	}
	_ = c.ResetFailed(ctx, name)
	return nil
}

// Kill sends sig to all processes of the unit.
func (c *Conn) Kill(ctx context.Context, name string, sig syscall.Signal) error {
	return c.call(ctx, "KillUnit", func(sd *sddbus.Conn) error {
		return sd.KillUnitWithTarget(ctx, name, sddbus.All, int32(sig))
	})
}

// ResetFailed clears a unit's failed state (and its start-limit counter).
func (c *Conn) ResetFailed(ctx context.Context, name string) error {
	err := c.call(ctx, "ResetFailedUnit", func(sd *sddbus.Conn) error {
		return sd.ResetFailedUnitContext(ctx, name)
	})
	if IsDBusError(err, errNoSuchUnit) {
		return nil
	}
	return err
}

// List returns the loaded units matching pattern with their active and
// sub state (the rest of State is not filled).
func (c *Conn) List(ctx context.Context, pattern string) ([]State, error) {
	var us []sddbus.UnitStatus
	err := c.call(ctx, "ListUnitsByPatterns", func(sd *sddbus.Conn) error {
		var err error
		us, err = sd.ListUnitsByPatternsContext(ctx, nil, []string{pattern})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list units %s: %w", pattern, err)
	}
	out := make([]State, 0, len(us))
	for _, u := range us {
		if u.LoadState == "not-found" {
			continue
		}
		out = append(out, State{Name: u.Name, ActiveState: u.ActiveState, SubState: u.SubState})
	}
	return out, nil
}

// Fetch reads the full State of one unit (two GetAll calls).
func (c *Conn) Fetch(ctx context.Context, name string) (State, error) {
	st := State{Name: name}
	for _, iface := range []string{"Unit", "Service"} {
		var props map[string]any
		err := c.call(ctx, "GetAll", func(sd *sddbus.Conn) error {
			var err error
			props, err = sd.GetUnitTypePropertiesContext(ctx, name, iface)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("read unit %s: %w", name, err)
		}
		vs := make(map[string]dbus.Variant, len(props))
		for k, v := range props {
			vs[k] = dbus.MakeVariant(v)
		}
		st.apply(vs)
	}
	return st, nil
}

// Property reads one property of a unit's interface ("Unit", "Service").
func (c *Conn) Property(ctx context.Context, name, iface, prop string) (any, error) {
	var p *sddbus.Property
	err := c.call(ctx, "Get", func(sd *sddbus.Conn) error {
		var err error
		p, err = sd.GetUnitTypePropertyContext(ctx, name, iface, prop)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s.%s of %s: %w", iface, prop, name, err)
	}
	return p.Value.Value(), nil
}
