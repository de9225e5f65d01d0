package consulbridge

import (
	"context"
	"maps"
	"time"
)

// entry is one service ID: what the bridge wants Consul to have for it
// and what, as far as it knows, Consul has. The difference is the work
// queued for it; the latest wish wins, so nothing is lost while Consul is
// down and nothing is sent twice for nothing.
type entry struct {
	id   string
	want *desired // nil: not wanted, deregister it

	regHash  string               // hash of the registration Consul has; "" unknown
	pushed   map[string]health    // check statuses Consul has
	pushedAt map[string]time.Time // when the bridge set them
	gone     bool                 // known to be absent from Consul
	opAt     time.Time            // last successful write

	dirty    bool // needs a write; counted in depth
	inflight bool
	retryAt  time.Time // after an error Consul answered, not before
	failures int
	waiters  []chan struct{} // closed after the next attempt
}

// needsWork reports whether Consul differs from what is wanted.
func (e *entry) needsWork() bool {
	if e.want == nil {
		return !e.gone
	}
	if e.regHash != e.want.hash {
		return true
	}
	for id, h := range e.want.ttl {
		if p, ok := e.pushed[id]; !ok || p != h {
			return true
		}
	}
	return false
}

// entry returns the entry of a service ID, creating it. Callers hold b.mu.
func (b *Bridge) entry(id string) *entry {
	e := b.entries[id]
	if e == nil {
		e = &entry{id: id}
		b.entries[id] = e
	}
	return e
}

// touch re-evaluates an entry after a change: it is queued when it needs
// work, released when it does not. Callers hold b.mu.
func (b *Bridge) touch(e *entry) {
	dirty := e.needsWork()
	if dirty != e.dirty {
		e.dirty = dirty
		if dirty {
			b.depth++
		} else {
			b.depth--
		}
		b.obs.QueueDepth(b.depth)
	}
	if e.inflight {
		return
	}
	if !dirty {
		for _, w := range e.waiters {
			close(w)
		}
		e.waiters = nil
		if e.want == nil {
			delete(b.entries, e.id)
		}
		return
	}
	if !b.queued[e.id] && !time.Now().Before(e.retryAt) {
		b.queued[e.id] = true
		b.queue = append(b.queue, e.id)
		signal(b.wake)
	}
}

// worker writes queued entries to Consul until ctx ends.
func (b *Bridge) worker(ctx context.Context) {
	for {
		id, ok := b.next(ctx)
		if !ok {
			return
		}
		b.process(ctx, id)
	}
}

// next waits for a queued entry and marks it in flight; while Consul is
// unreachable it waits for the pause to pass first.
func (b *Bridge) next(ctx context.Context) (string, bool) {
	for {
		b.mu.Lock()
		wait := time.Until(b.pause)
		for wait <= 0 && len(b.queue) > 0 {
			id := b.queue[0]
			b.queue = b.queue[1:]
			delete(b.queued, id)
			e := b.entries[id]
			if e == nil || e.inflight || !e.dirty {
				continue
			}
			e.inflight = true
			if len(b.queue) > 0 {
				signal(b.wake) // another worker can take the next one
			}
			b.mu.Unlock()
			return id, true
		}
		b.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return "", false
		case <-b.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// process makes Consul match one entry: deregister, or register (when the
// registration differs) and push the check statuses that differ.
func (b *Bridge) process(ctx context.Context, id string) {
	b.mu.Lock()
	e := b.entries[id]
	want, regHash := e.want, e.regHash
	b.mu.Unlock()

	var err error
	switch {
	case want == nil:
		err = b.call("deregister", func() error { return b.consul.Deregister(ctx, id) })
		if err == nil {
			b.mu.Lock()
			e.gone, e.regHash, e.pushed, e.pushedAt, e.opAt = true, "", nil, nil, time.Now()
			b.mu.Unlock()
		}
	default:
		if regHash != want.hash {
			err = b.call("register", func() error { return b.consul.Register(ctx, withStatus(want.reg, want.ttl)) })
			if err == nil {
				now := time.Now()
				b.mu.Lock()
				e.gone, e.regHash, e.opAt = false, want.hash, now
				// Registered with the wanted statuses and no output.
				e.pushed, e.pushedAt = map[string]health{}, map[string]time.Time{}
				for cid, h := range want.ttl {
					e.pushed[cid], e.pushedAt[cid] = health{Status: h.Status}, now
				}
				b.mu.Unlock()
			}
		}
		if err == nil {
			err = b.pushChecks(ctx, e, want)
		}
	}
	b.finish(e, err)
}

// pushChecks updates the TTL checks whose status differs from want.
func (b *Bridge) pushChecks(ctx context.Context, e *entry, want *desired) error {
	b.mu.Lock()
	pushed := maps.Clone(e.pushed)
	b.mu.Unlock()
	for cid, h := range want.ttl {
		if p, ok := pushed[cid]; ok && p == h {
			continue
		}
		err := b.call("check_update", func() error { return b.consul.UpdateTTL(ctx, cid, h.Status, h.Output) })
		b.mu.Lock()
		switch {
		case err == nil:
			if e.pushed == nil {
				e.pushed = map[string]health{}
			}
			if e.pushedAt == nil {
				e.pushedAt = map[string]time.Time{}
			}
			e.pushed[cid], e.pushedAt[cid], e.opAt = h, time.Now(), time.Now()
		case stale(err):
			e.regHash = "" // Consul lost it: register again
		}
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// call runs one Consul call and tells the observer.
func (b *Bridge) call(op string, fn func() error) error {
	start := time.Now()
	err := fn()
	b.obs.ConsulOp(op, time.Since(start), err)
	return err
}

// finish ends an attempt: on success the entry is done or queued again
// (it changed meanwhile); when Consul is unreachable every write pauses
// with backoff; an error Consul answered backs this entry off alone.
func (b *Bridge) finish(e *entry, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.inflight = false
	for _, w := range e.waiters {
		close(w)
	}
	e.waiters = nil
	switch {
	case err == nil:
		e.failures, e.retryAt = 0, time.Time{}
		b.reachable()
	case unreachable(err):
		b.unreachable(err)
	default:
		e.failures++
		d := min(time.Second<<min(e.failures-1, 6), time.Minute)
		e.retryAt = time.Now().Add(d)
		b.log.Warn("consul refused a change, retrying later", "service", e.id, "err", err, "retry_in", d)
		id := e.id
		time.AfterFunc(d, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if e := b.entries[id]; e != nil {
				b.touch(e)
			}
		})
	}
	b.touch(e)
}

// unreachable pauses all writes: 250ms after the first failure, doubling
// to 5s, so Consul is probed, not hammered. Callers hold b.mu.
func (b *Bridge) unreachable(err error) {
	now := time.Now()
	if now.Before(b.pause) {
		return // another attempt of the same pause
	}
	if !b.down {
		b.down, b.backoff = true, 250*time.Millisecond
		b.log.Warn("consul is unreachable; changes are queued and retried", "err", err)
	} else {
		b.backoff = min(2*b.backoff, 5*time.Second)
	}
	b.pause = now.Add(b.backoff)
}

// reachable ends a pause; coming back from one runs the anti-entropy pass
// at once. Callers hold b.mu.
func (b *Bridge) reachable() {
	if !b.down {
		return
	}
	b.down, b.backoff, b.pause = false, 0, time.Time{}
	b.log.Info("consul is reachable again; syncing")
	signal(b.syncKick)
	signal(b.wake)
}
