package consulbridge

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/jobspec"
)

// restartState counts the consecutive critical results of a check with
// check_restart.
type restartState struct {
	rc       restartCheck
	critical int
	lastAt   time.Time // last result counted (polled checks)
	pending  bool      // a restart was asked for ...
	since    time.Time // ... of the unit that came up at this time
}

// syncRestarts keeps a counter per check_restart check of an instance.
// Callers hold b.mu.
func (b *Bridge) syncRestarts(inst *instance, rcs []restartCheck) {
	keep := map[string]bool{}
	polled := false
	for _, rc := range rcs {
		keep[rc.id] = true
		if rs := inst.restarts[rc.id]; rs != nil {
			rs.rc = rc
		} else {
			inst.restarts[rc.id] = &restartState{rc: rc}
			polled = polled || rc.check.Type != jobspec.CheckScript
		}
	}
	for id := range inst.restarts {
		if !keep[id] {
			delete(inst.restarts, id)
		}
	}
	if polled {
		signal(b.pollKick)
	}
}

// observe counts one result of a check of inst and asks the supervisor for
// a restart after check_restart.limit critical results in a row; results
// while the unit is not running or within grace of its start do not
// count. Callers hold b.mu.
func (b *Bridge) observe(inst *instance, id, status string, at time.Time) {
	rs := inst.restarts[id]
	if rs == nil {
		return
	}
	st := inst.in.State
	if rs.pending {
		if !st.ActiveSince.After(rs.since) {
			return // the restart has not happened yet
		}
		rs.pending = false
	}
	cr := rs.rc.check.CheckRestart
	if !st.Running() || at.Before(st.ActiveSince.Add(cr.Grace)) || status != api.HealthCritical {
		rs.critical = 0
		return
	}
	rs.critical++
	if rs.critical < cr.Limit {
		return
	}
	rs.critical, rs.pending, rs.since = 0, true, st.ActiveSince
	k, ctx, tasks := inst.key, b.ctx, b.tasks
	reason := fmt.Sprintf("check_restart: %s was critical %d times in a row", rs.rc.name, cr.Limit)
	b.log.Warn("restarting task", "job", k.job, "task", k.task, "index", k.index, "reason", reason)
	go func() {
		if err := tasks.RestartTask(ctx, k.job, k.task, k.index, reason); err != nil && ctx.Err() == nil {
			b.log.Error("check_restart", "job", k.job, "task", k.task, "index", k.index, "err", err)
		}
	}()
}

// pollLoop reads the results of Consul's own checks (http, tcp) that have
// check_restart, one call for all of them, as often as the most frequent
// of them runs. Nothing is polled when no such check exists.
func (b *Bridge) pollLoop(ctx context.Context) {
	for {
		period := b.pollPeriod()
		var tick <-chan time.Time
		if period > 0 {
			tick = time.After(period)
		}
		select {
		case <-ctx.Done():
			return
		case <-b.pollKick:
			continue
		case <-tick:
		}
		checks, err := b.consul.Checks(ctx)
		if err != nil {
			continue
		}
		now := time.Now()
		b.mu.Lock()
		for _, inst := range b.insts {
			for id, rs := range inst.restarts {
				c := checks[id]
				if rs.rc.check.Type == jobspec.CheckScript || c == nil || now.Sub(rs.lastAt) < rs.rc.check.Interval-period/2 {
					continue
				}
				rs.lastAt = now
				b.observe(inst, id, c.Status, now)
			}
		}
		b.mu.Unlock()
	}
}

// pollPeriod is the shortest interval of the polled checks, 0 if none.
func (b *Bridge) pollPeriod() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var p time.Duration
	for _, inst := range b.insts {
		for _, rs := range inst.restarts {
			if iv := rs.rc.check.Interval; rs.rc.check.Type != jobspec.CheckScript && (p == 0 || iv < p) {
				p = iv
			}
		}
	}
	if p > 0 && p < time.Second {
		p = time.Second
	}
	return p
}
