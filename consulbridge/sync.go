package consulbridge

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/supervisor"
)

// syncLoop runs the anti-entropy pass at start, every SyncInterval, and
// when Consul comes back; a failed pass is retried sooner, with backoff.
func (b *Bridge) syncLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-b.syncKick:
		}
		next := b.cfg.SyncInterval
		if err := b.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), 5*time.Second)
			next = min(backoff, next)
			b.log.Debug("consul sync failed", "err", err, "retry_in", next)
		} else {
			backoff = 0
		}
		timer.Reset(next)
	}
}

// sync is the anti-entropy pass: two calls list the agent's services and
// checks, which are diffed against what is wanted. What is missing or
// different is queued again; owned services nobody wants are queued for
// deregistration (not during the probation after start); everything
// else is left alone.
func (b *Bridge) sync(ctx context.Context) error {
	b.mu.Lock()
	tasks := b.tasks
	b.mu.Unlock()
	insts, err := tasks.Instances()
	if err != nil {
		return fmt.Errorf("consul sync: %w", err)
	}
	start := time.Now()
	services, err := b.consul.Services(ctx)
	var checks map[string]*api.AgentCheck
	if err == nil {
		checks, err = b.consul.Checks(ctx)
	}
	b.obs.ConsulOp("sync", time.Since(start), err)

	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if unreachable(err) {
			b.unreachable(err)
		}
		return err
	}
	if b.down {
		b.down, b.backoff, b.pause = false, 0, time.Time{}
		b.log.Info("consul is reachable again")
		signal(b.wake)
	}
	b.refresh(insts)
	b.remote = map[string]bool{}
	for id, s := range services {
		if owned(b.cfg.Node, s) {
			b.remote[id] = true
		}
	}
	for id, e := range b.entries {
		if e.inflight || e.opAt.After(start) {
			continue // Consul's answer is older than the last write
		}
		if e.want == nil {
			e.gone = services[id] == nil
		} else {
			b.diff(e, services[id], checks)
		}
		b.touch(e)
	}
	if time.Since(b.started) < b.cfg.Probation {
		return nil
	}
	for id := range b.remote {
		if b.entries[id] == nil {
			b.log.Info("deregistering a service of this node that no task wants", "service", id)
			b.touch(b.entry(id))
		}
	}
	return nil
}

// diff compares a wanted entry with what Consul has. Callers hold b.mu.
func (b *Bridge) diff(e *entry, s *api.AgentService, checks map[string]*api.AgentCheck) {
	if s == nil || s.Meta[MetaHash] != e.want.hash {
		e.regHash, e.pushed, e.pushedAt = "", nil, nil
		return
	}
	for _, c := range e.want.reg.Checks {
		if checks[c.CheckID] == nil {
			e.regHash, e.pushed, e.pushedAt = "", nil, nil
			return
		}
	}
	e.regHash = e.want.hash
	pushed := map[string]health{}
	for cid := range e.want.ttl {
		// A status pushed long ago (or before this agent started) is
		// pushed again, before its TTL runs out.
		if time.Since(e.pushedAt[cid]) < CheckTTL/2 {
			c := checks[cid]
			pushed[cid] = health{Status: c.Status, Output: c.Output}
		}
	}
	e.pushed = pushed
}

// refresh takes the supervisor's full list of instances: instances it no
// longer lists are no longer wanted. Callers hold b.mu.
func (b *Bridge) refresh(insts []supervisor.Instance) {
	seen := make(map[instKey]bool, len(insts))
	for _, in := range insts {
		k := instKey{in.Job.Name, in.Task.Name, in.Index}
		seen[k] = true
		inst := b.insts[k]
		if inst == nil {
			if !in.Live {
				continue
			}
			inst = b.newInstance(k)
		}
		prev := inst.in.State
		inst.in, inst.wanted = in, true
		if in.State != prev || inst.seq == 0 {
			b.setState(inst, prev, in.State)
		}
		b.recompute(inst)
	}
	for k, inst := range b.insts {
		if !seen[k] {
			inst.wanted = false
			b.recompute(inst)
		}
	}
}
