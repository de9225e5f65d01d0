package consulbridge

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/consul/api"

	"github.com/unitvisor/unitvisor/units"
)

// health is a check status and its output.
type health struct {
	Status string // api.HealthPassing, HealthWarning or HealthCritical
	Output string
}

// maxOutput is where check output is cut (Consul's default limit too).
const maxOutput = 4096

// unitHealth is the health a TTL check reports for a unit state:
// running is passing; on its way up (starting, waiting to restart,
// reloading, stopping) is warning; failed or dead is critical. The output
// says why, with systemd's Result and the exit status.
func unitHealth(st units.State) health {
	state := fmt.Sprintf("%s is %s (%s)", st.Name, st.ActiveState, st.SubState)
	switch {
	case st.Gone:
		return health{api.HealthCritical, st.Name + " is gone"}
	case st.Running():
		return health{api.HealthPassing, state}
	case st.ActiveState == "activating" && st.SubState == "auto-restart":
		return health{api.HealthWarning, state + ": restarting after " + exitText(st) + restarts(st)}
	case st.ActiveState == "activating", st.ActiveState == "reloading":
		return health{api.HealthWarning, state + restarts(st)}
	case st.ActiveState == "deactivating":
		return health{api.HealthWarning, state + ": stopping"}
	case st.ActiveState == "active" && st.SubState == "exited":
		return health{api.HealthCritical, state + ": the main process ended, " + exitText(st)}
	}
	return health{api.HealthCritical, state + ": " + exitText(st) + restarts(st)}
}

// restartHold is how long the bridge holds back a failed or dead state of
// a unit whose task restarts on failure and that was up until then:
// systemd passes through that state on its way to auto-restart (two
// signals, a moment apart), and pushing it would flap the check to
// critical for a restart that is only a warning. A unit that stays there
// (no restart follows) shows critical after the hold.
const restartHold = 100 * time.Millisecond

// unitStep is the health to show when a unit moves from prev to cur; hold
// is set when cur may be a step of a restart (see restartHold) and should
// not be shown before the hold passes. restartOnFailure tells whether the
// task restarts on failure.
func unitStep(prev, cur units.State, restartOnFailure bool) (h health, hold bool) {
	autoRestart := prev.ActiveState == "activating" && prev.SubState == "auto-restart"
	down := cur.ActiveState == "failed" || cur.ActiveState == "inactive"
	switch {
	case down && autoRestart && cur.ActiveState == "inactive" && !cur.Gone:
		// Between auto-restart and the new start.
		return health{api.HealthWarning, fmt.Sprintf("%s is restarting%s", cur.Name, restarts(cur))}, false
	case down && restartOnFailure && !autoRestart && !cur.Gone:
		return unitHealth(cur), true
	}
	return unitHealth(cur), false
}

// exitText describes how the main process last ended.
func exitText(st units.State) string {
	var parts []string
	if st.Result != "" {
		parts = append(parts, "result "+st.Result)
	}
	if e := st.Exit(); e != "" {
		parts = append(parts, e)
	}
	if len(parts) == 0 {
		return "no exit status"
	}
	return strings.Join(parts, ", ")
}

func restarts(st units.State) string {
	if st.NRestarts == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d restarts)", st.NRestarts)
}

// cut makes s valid UTF-8 and at most maxOutput bytes long, without
// splitting a character.
func cut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxOutput {
		return s
	}
	i := maxOutput
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
