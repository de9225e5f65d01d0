package consulbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/supervisor"
)

// CheckTTL is the TTL of the checks whose status the bridge pushes. Their
// status is pushed when it changes, not as a heartbeat, so that steady
// state costs no call per task; the anti-entropy pass repairs what Consul
// lost and refreshes a status pushed more than half a TTL ago. A TTL that
// does run out means the agent has been gone that long.
const CheckTTL = 30 * 24 * time.Hour

// checkHost is where Consul's http and tcp checks reach a task whose
// service has no address: the Consul agent runs on the task's host.
const checkHost = "127.0.0.1"

// desired is what one service of an instance should look like in Consul.
type desired struct {
	id   string
	reg  *api.AgentServiceRegistration // its MetaHash set, check statuses not
	hash string
	ttl  map[string]health // pushed checks (ttl, script): check ID -> status
}

// scriptCheck is a script check of a registered instance.
type scriptCheck struct {
	id    string // check ID
	check jobspec.Check
	argv  []string // interpolated
}

// restartCheck is a check with check_restart.
type restartCheck struct {
	id    string
	check jobspec.Check
	name  string // for logs: service "x" check "y"
}

// registered reports whether an instance's services belong in Consul: a
// live job wants it, its unit is loaded and has been active (the
// registration comes when the unit is first active), it is not being
// stopped (since stoppingAt, until a new start), and it has not completed.
// While it restarts or after it failed it stays registered, with a
// warning or critical status.
func registered(in supervisor.Instance, wanted bool, stoppingAt time.Time) bool {
	st := in.State
	switch {
	case !wanted, !in.Live, st.Gone, in.Task == nil, in.Job == nil:
		return false
	case st.ActiveSince.IsZero():
		return false
	case !stoppingAt.IsZero() && !st.ActiveSince.After(stoppingAt):
		return false
	case st.ActiveState == "active" && st.SubState == "exited":
		return false
	}
	return true
}

// buildServices returns the services of a registered instance. unit is
// the health its TTL checks show; results holds the last result of each
// script check by check ID; a script check without one, or whose unit is
// not running, shows unit too.
func buildServices(node string, in supervisor.Instance, unit health, results map[string]health) ([]desired, []scriptCheck, []restartCheck) {
	var out []desired
	var scripts []scriptCheck
	var restarts []restartCheck
	interp := func(s string) string { return jobspec.Interpolate(s, in.Vars) }
	for _, svc := range in.Task.Services {
		id := ServiceID(node, in.Job.Name, in.Task.Name, in.Index, svc.Name)
		meta := map[string]string{}
		for k, v := range svc.Meta {
			meta[k] = interp(v)
		}
		meta[MetaSource] = source
		meta[MetaNode] = node
		meta[MetaJob] = in.Job.Name
		meta[MetaTask] = in.Task.Name
		meta[MetaIndex] = strconv.Itoa(in.Index)
		meta[MetaUnit] = in.Unit
		reg := &api.AgentServiceRegistration{
			ID: id, Name: svc.Name, Port: in.Ports[svc.Port], Address: interp(svc.Address),
			EnableTagOverride: svc.EnableTagOverride, Meta: meta,
		}
		for _, t := range svc.Tags {
			reg.Tags = append(reg.Tags, interp(t))
		}
		host := checkHost
		if reg.Address != "" {
			host = reg.Address
		}
		d := desired{id: id, reg: reg, ttl: map[string]health{}}
		for _, c := range svc.Checks {
			cid := CheckID(id, c.Name)
			ac := &api.AgentServiceCheck{CheckID: cid, Name: fmt.Sprintf("%s %s", svc.Name, c.Name)}
			addr := net.JoinHostPort(host, strconv.Itoa(in.Ports[c.Port]))
			switch c.Type {
			case jobspec.CheckTTL:
				ac.TTL = CheckTTL.String()
				ac.Notes = "follows the state of " + in.Unit + ", pushed by unitvisor"
				d.ttl[cid] = unit
			case jobspec.CheckScript:
				argv := []string{interp(c.Command)}
				for _, a := range c.Args {
					argv = append(argv, interp(a))
				}
				ac.TTL = CheckTTL.String()
				ac.Notes = fmt.Sprintf("script run by unitvisor every %s in the context of %s", c.Interval, in.Unit)
				h, ok := results[cid]
				if !ok || !in.State.Running() {
					h = unit
				}
				d.ttl[cid] = h
				scripts = append(scripts, scriptCheck{id: cid, check: c, argv: argv})
			case jobspec.CheckHTTP:
				ac.HTTP = c.Protocol + "://" + addr + interp(c.Path)
				ac.Method, ac.TLSSkipVerify = c.Method, c.TLSSkipVerify
				ac.Interval, ac.Timeout = c.Interval.String(), c.Timeout.String()
			case jobspec.CheckTCP:
				ac.TCP = addr
				ac.Interval, ac.Timeout = c.Interval.String(), c.Timeout.String()
			}
			reg.Checks = append(reg.Checks, ac)
			if c.CheckRestart != nil {
				restarts = append(restarts, restartCheck{id: cid, check: c, name: fmt.Sprintf("service %q check %q", svc.Name, c.Name)})
			}
		}
		d.hash = regHash(reg)
		meta[MetaHash] = d.hash
		out = append(out, d)
	}
	return out, scripts, restarts
}

// regHash identifies a registration; check statuses are not part of it.
func regHash(reg *api.AgentServiceRegistration) string {
	b, _ := json.Marshal(reg)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// withStatus returns a copy of reg whose pushed checks start with the
// given statuses (Consul would start them critical).
func withStatus(reg *api.AgentServiceRegistration, ttl map[string]health) *api.AgentServiceRegistration {
	cp := *reg
	cp.Checks = make(api.AgentServiceChecks, len(reg.Checks))
	for i, c := range reg.Checks {
		cc := *c
		if h, ok := ttl[c.CheckID]; ok {
			cc.Status = h.Status
		}
		cp.Checks[i] = &cc
	}
	return &cp
}
