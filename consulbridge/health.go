package consulbridge

import (
	"fmt"
	"strings"
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
