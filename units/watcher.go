package units

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// Event is a unit's new state; State.Gone means systemd unloaded it.
type Event struct {
	State
}

// Watcher turns systemd's PropertiesChanged and UnitRemoved signals for our
// units into Events and keeps the last known State of each. It never polls
// in the hot path: a re-list every heal interval (and after every
// reconnect) only repairs what missed signals left stale.
type Watcher struct {
	log     *slog.Logger
	conn    *Conn
	namer   Namer
	heal    time.Duration
	dialBus func() (*dbus.Conn, error)

	events chan Event
	synced chan struct{}
	once   sync.Once

	// Events wait in queue until the consumer takes them, so the signal
	// loop never blocks on a slow (or not yet started) consumer: the first
	// sync alone emits one event per unit, thousands on a big node.
	qmu   sync.Mutex
	queue []Event
	wake  chan struct{}

	mu    sync.RWMutex
	cache map[string]State

	// OOM, if set, reports kernel OOM kills on cgroup v1 hosts.
	OOM *OOMNotifier
}

// NewWatcher returns a watcher of the units namer owns; heal is the period
// of the repairing re-list.
func NewWatcher(conn *Conn, namer Namer, heal time.Duration, log *slog.Logger) *Watcher {
	return &Watcher{
		log: log, conn: conn, namer: namer, heal: heal,
		dialBus: systemBus,
		events:  make(chan Event, 64),
		wake:    make(chan struct{}, 1),
		synced:  make(chan struct{}),
		cache:   map[string]State{},
	}
}

func systemBus() (*dbus.Conn, error) {
	bus, err := dbus.SystemBusPrivate()
	if err != nil {
		return nil, err
	}
	if err := bus.Auth(nil); err != nil {
		bus.Close()
		return nil, err
	}
	if err := bus.Hello(); err != nil {
		bus.Close()
		return nil, err
	}
	return bus, nil
}

// Events is the stream of state changes. It must be drained.
func (w *Watcher) Events() <-chan Event { return w.events }

// Synced is closed once the first full listing is in the cache.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// Get returns the cached state of a unit.
func (w *Watcher) Get(name string) (State, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.cache[name]
	return s, ok
}

// Snapshot returns the cached states of all our units.
func (w *Watcher) Snapshot() []State {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]State, 0, len(w.cache))
	for _, s := range w.cache {
		out = append(out, s)
	}
	return out
}

// Run watches until ctx ends, reconnecting with backoff when the bus drops.
func (w *Watcher) Run(ctx context.Context) error {
	go w.pump(ctx)
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := w.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		w.log.Warn("unit watcher lost the bus, reconnecting", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session is one bus connection's lifetime: subscribe, resync, then follow
// signals until the connection closes.
func (w *Watcher) session(ctx context.Context) error {
	bus, err := w.dialBus()
	if err != nil {
		return fmt.Errorf("connect to system bus: %w", err)
	}
	defer bus.Close()
	// One rule for all unit objects (a path namespace cannot match a name
	// prefix inside one path element), filtered by name below.
	if err := bus.AddMatchSignal(
		dbus.WithMatchSender("org.freedesktop.systemd1"),
		dbus.WithMatchInterface("org.freedesktop.DBus.Properties"),
		dbus.WithMatchMember("PropertiesChanged"),
		dbus.WithMatchPathNamespace(dbus.ObjectPath(busPathPrefix[:len(busPathPrefix)-1])),
	); err != nil {
		return fmt.Errorf("add match PropertiesChanged: %w", err)
	}
	if err := bus.AddMatchSignal(
		dbus.WithMatchSender("org.freedesktop.systemd1"),
		dbus.WithMatchInterface("org.freedesktop.systemd1.Manager"),
		dbus.WithMatchMember("UnitRemoved"),
	); err != nil {
		return fmt.Errorf("add match UnitRemoved: %w", err)
	}
	sigs := make(chan *dbus.Signal, 4096)
	bus.Signal(sigs)
	// Without a subscriber systemd does not emit unit signals at all.
	if err := bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").
		CallWithContext(ctx, "org.freedesktop.systemd1.Manager.Subscribe", 0).Err; err != nil {
		return fmt.Errorf("subscribe to systemd: %w", err)
	}
	if err := w.resync(ctx, true); err != nil {
		return err
	}
	select {
	case <-w.synced: // not the first session: the bus was lost and is back
		if obs := w.conn.observer(); obs != nil {
			obs.DBusReconnect("signals")
		}
	default:
	}
	w.once.Do(func() { close(w.synced) })

	tick := time.NewTicker(w.heal)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig, ok := <-sigs:
			if !ok {
				return fmt.Errorf("bus connection closed")
			}
			w.handle(ctx, sig)
		case <-tick.C:
			if err := w.resync(ctx, false); err != nil {
				w.log.Warn("unit watcher re-list", "err", err)
			}
		}
	}
}

func (w *Watcher) handle(ctx context.Context, sig *dbus.Signal) {
	switch sig.Name {
	case "org.freedesktop.systemd1.Manager.UnitRemoved":
		var name string
		var path dbus.ObjectPath
		if dbus.Store(sig.Body, &name, &path) != nil || !w.namer.Owns(name) {
			return
		}
		// daemon-reload and daemon-reexec free and recreate every unit,
		// sending UnitRemoved for each: a unit is gone only if it is not
		// loaded when systemd answers again (after the reload).
		if w.loaded(ctx, name) {
			return
		}
		w.gone(ctx, name)
	case "org.freedesktop.DBus.Properties.PropertiesChanged":
		name, ok := unitFromPath(string(sig.Path))
		if !ok || !w.namer.Owns(name) {
			return
		}
		var iface string
		var changed map[string]dbus.Variant
		var invalidated []string
		if dbus.Store(sig.Body, &iface, &changed, &invalidated) != nil {
			return
		}
		w.mu.RLock()
		st, known := w.cache[name]
		w.mu.RUnlock()
		if slices.ContainsFunc(invalidated, tracked) {
			w.refresh(ctx, name)
			return
		}
		// A new unit starts empty: systemd sends every emits-change
		// property of the interface in each signal, and applying signals
		// in order avoids a read that jumps ahead of still-queued ones.
		if !known {
			st = State{Name: name}
		}
		if st.apply(changed) || !known {
			w.set(ctx, st)
		}
	}
}

func tracked(prop string) bool {
	return slices.Contains(unitProps, prop) || slices.Contains(serviceProps, prop)
}

// refresh reads a unit's full state and publishes it if it changed.
func (w *Watcher) refresh(ctx context.Context, name string) {
	st, err := w.conn.Fetch(ctx, name)
	if err != nil {
		w.log.Debug("read unit state", "unit", name, "err", err)
		return
	}
	w.set(ctx, st)
}

func (w *Watcher) set(ctx context.Context, st State) {
	w.mu.Lock()
	old, ok := w.cache[st.Name]
	if ok && st.OOMKills < old.OOMKills { // a full read knows nothing of OOM kills
		st.OOMKills, st.OOMKilledPID = old.OOMKills, old.OOMKilledPID
	}
	if st.Result == "oom-kill" && (!ok || old.Result != "oom-kill") {
		st.OOMKills++
		st.OOMKilledPID = st.ExecMainPID
	}
	w.cache[st.Name] = st
	w.mu.Unlock()
	if w.OOM != nil && st.Running() && st.MainPID != 0 {
		name := st.Name
		if err := w.OOM.Arm(name, st.MainPID, func() { w.oomKilled(name) }); err != nil {
			w.log.Debug("watch OOM kills", "unit", name, "err", err)
		}
	}
	// A Service-interface signal can come before the first Unit one: wait
	// until the state is known before telling anyone.
	if ok && old == st || st.ActiveState == "" {
		return
	}
	w.emit(st)
}

// oomKilled records an OOM kill reported by the memory controller; the
// main process at that moment is the one the kill most likely hit.
func (w *Watcher) oomKilled(name string) {
	w.mu.Lock()
	st, ok := w.cache[name]
	if ok {
		st.OOMKills++
		st.OOMKilledPID = st.MainPID
		w.cache[name] = st
	}
	w.mu.Unlock()
	if ok {
		w.log.Info("out of memory", "unit", name, "pid", st.OOMKilledPID)
		w.emit(st)
	}
}

// loaded reports whether systemd has the unit loaded.
func (w *Watcher) loaded(ctx context.Context, name string) bool {
	list, err := w.conn.List(ctx, name)
	if err != nil {
		return false
	}
	for _, l := range list {
		if l.Name == name {
			return true
		}
	}
	return false
}

func (w *Watcher) gone(ctx context.Context, name string) {
	w.mu.Lock()
	st, ok := w.cache[name]
	delete(w.cache, name)
	w.mu.Unlock()
	if !ok {
		st = State{Name: name}
	}
	st.Gone = true
	w.emit(st)
}

// emit queues an event; it never blocks.
func (w *Watcher) emit(st State) {
	w.qmu.Lock()
	w.queue = append(w.queue, Event{State: st})
	w.qmu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pump hands queued events to the Events channel, in order.
func (w *Watcher) pump(ctx context.Context) {
	for {
		w.qmu.Lock()
		batch := w.queue
		w.queue = nil
		w.qmu.Unlock()
		for _, ev := range batch {
			select {
			case w.events <- ev:
			case <-ctx.Done():
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			return
		}
	}
}

// resync lists our units and repairs the cache: units not cached or whose
// state differs are read in full (all of them when full is set), units no
// longer listed are gone.
func (w *Watcher) resync(ctx context.Context, full bool) error {
	listed, err := w.conn.List(ctx, w.namer.Pattern())
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(listed))
	for _, l := range listed {
		if !w.namer.Owns(l.Name) {
			continue
		}
		seen[l.Name] = true
		cached, ok := w.Get(l.Name)
		if full || !ok || cached.ActiveState != l.ActiveState || cached.SubState != l.SubState {
			w.refresh(ctx, l.Name)
		}
	}
	for _, s := range w.Snapshot() {
		if !seen[s.Name] {
			w.gone(ctx, s.Name)
		}
	}
	return nil
}
