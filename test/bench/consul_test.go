//go:build integration

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/internal/consultest"
	"github.com/unitvisor/unitvisor/internal/sdtest"
	"github.com/unitvisor/unitvisor/units"
)

// BenchmarkConsulCheckLatency measures how long a unit state change takes
// to show in Consul: from systemd's StateChangeTimestamp of the new state
// (the D-Bus signal carries it) to the moment a blocking query on Consul's
// catalog (/v1/health/checks/:service) returns the new check status. A task
// is killed 50 times; each kill makes two status changes (passing ->
// warning while systemd waits to restart it, -> passing once it runs
// again): 100 changes. Prints p50/p99; the target is p99 < 50ms.
func BenchmarkConsulCheckLatency(b *testing.B) {
	const kills = 50
	c := consultest.Start(b)
	cc := c.Client(b, "")
	a := sdtest.StartAgent(b, fmt.Sprintf("consul {\n  address = %q\n}\n", c.HTTPAddr))
	job := "lat" + a.Prefix
	service := "lat-" + a.Prefix
	a.MustCLI("job", "run", sdtest.WriteJob(b, "lat.hcl", fmt.Sprintf(`
job %q {
  task "api" {
    driver = "exec"
    config {
      command = "/bin/sleep"
      args    = ["3600"]
    }
    restart {
      attempts = 1000
      interval = "2h"
      delay    = "300ms"
    }
    service { name = %q }
  }
}`, job, service)))
	unit := a.Unit(job, "api", 0)

	// The unit's states with systemd's timestamps, from our own watcher.
	conn := sdtest.Conn(b)
	namer, _ := units.NewNamer(a.Prefix)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := units.NewWatcher(conn, namer, time.Hour, sdtest.Logger(b))
	go w.Run(ctx)
	<-w.Synced()
	type change struct {
		at     time.Time
		status string
		what   string
	}
	var mu sync.Mutex
	var changes, seen []change
	go func() {
		last := ""
		for ev := range w.Events() {
			if ev.Name != unit {
				continue
			}
			status := ""
			switch {
			case ev.Running():
				status = api.HealthPassing
			case ev.ActiveState == "activating":
				status = api.HealthWarning
			default:
				continue
			}
			if status != last {
				last = status
				mu.Lock()
				changes = append(changes, change{ev.StateSince, status, ev.ActiveState + "/" + ev.SubState})
				mu.Unlock()
			}
		}
	}()
	// What Consul's catalog shows, as soon as it changes.
	go func() {
		var index uint64
		for ctx.Err() == nil {
			checks, meta, err := cc.Health().Checks(service, (&api.QueryOptions{WaitIndex: index, WaitTime: 10 * time.Second}).WithContext(ctx))
			now := time.Now()
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			index = meta.LastIndex
			if len(checks) == 1 {
				mu.Lock()
				if n := len(seen); n == 0 || seen[n-1].status != checks[0].Status {
					seen = append(seen, change{now, checks[0].Status, checks[0].Output})
				}
				mu.Unlock()
			}
		}
	}()
	waitFor := func(status string, after int) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := len(seen) > after && seen[len(seen)-1].status == status
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, c := range seen[max(0, len(seen)-4):] {
			b.Logf("consul: %s %s %s", c.at.Format(time.StampMicro), c.status, c.what)
		}
		for _, c := range changes[max(0, len(changes)-4):] {
			b.Logf("unit: %s %s %s", c.at.Format(time.StampMicro), c.status, c.what)
		}
		b.Fatalf("consul did not show %s after change %d", status, after)
	}
	waitFor(api.HealthPassing, 0)

	b.ResetTimer()
	for range kills {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if err := conn.Kill(ctx, unit, 9); err != nil {
			b.Fatal(err)
		}
		waitFor(api.HealthWarning, n)
		waitFor(api.HealthPassing, n+1)
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	j := 0
	for i, ch := range changes {
		if i == 0 {
			continue // the first start, before the benchmark
		}
		for j < len(seen) && (seen[j].status != ch.status || seen[j].at.Before(ch.at)) {
			j++
		}
		if j == len(seen) {
			b.Fatalf("state change %d (%s at %s) never showed in Consul", i, ch.status, ch.at.Format(time.StampMicro))
		}
		lat = append(lat, seen[j].at.Sub(ch.at))
	}
	if len(lat) < 2*kills {
		b.Fatalf("measured %d state changes, want %d", len(lat), 2*kills)
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.Logf("unit state change -> Consul catalog, %d changes: p50 %s, p99 %s, max %s (target p99 < 50ms)",
		len(lat), p(0.5).Round(time.Microsecond), p(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
}
