package metrics

import (
	"context"
	"time"

	"github.com/unitvisor/unitvisor/units"
)

func (m *Metrics) usageLoop(ctx context.Context) {
	tick := time.NewTicker(m.cfg.UsageInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.RefreshUsage()
			m.perTaskText() // the readings changed: encode before the next scrape
		}
	}
}

// RefreshUsage reads the cgroup accounting of every loaded unit, one
// batched read per unit, outside the lock; scrapes serve the result until
// the next refresh. A unit without a cgroup (failed, dead) has no usage.
func (m *Metrics) RefreshUsage() {
	if m.cfg.Usage == nil {
		return
	}
	began := time.Now()
	type read struct {
		in    *instance
		unit  string
		usage units.Usage
		ok    bool
	}
	m.mu.RLock()
	reads := make([]read, 0, len(m.insts))
	for _, in := range m.insts {
		if in.live && hasCgroup(in.state) {
			reads = append(reads, read{in: in, unit: in.unit})
		}
	}
	m.mu.RUnlock()
	for i := range reads {
		u, err := m.cfg.Usage.Usage(units.UnitCgroup(m.cfg.Slice, reads[i].unit))
		reads[i].usage, reads[i].ok = u, err == nil
	}
	m.mu.Lock()
	m.bump()
	for _, r := range reads {
		in := r.in
		if !in.live || in.unit != r.unit || !hasCgroup(in.state) {
			continue // stopped, gone or replaced meanwhile: the reading is stale
		}
		in.usage, in.hasUsage = r.usage, r.ok
		if r.ok && in.oomCgroup.observe(r.usage.OOMKills) {
			m.dirty = true
		}
	}
	m.mu.Unlock()
	m.agent.usageRefresh.Set(time.Since(began).Seconds())
}
