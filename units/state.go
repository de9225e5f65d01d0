package units

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/godbus/dbus/v5"
)

// State is what systemd reports about one unit: the Unit interface's
// ActiveState/SubState/InvocationID and the Service interface's result and
// main process.
type State struct {
	Name           string    `json:"unit"`
	ActiveState    string    `json:"active_state"`
	SubState       string    `json:"sub_state"`
	Result         string    `json:"result,omitempty"`
	ExecMainCode   int32     `json:"exec_main_code,omitempty"` // CLD_EXITED=1, CLD_KILLED=2, CLD_DUMPED=3
	ExecMainStatus int32     `json:"exec_main_status"`
	MainPID        uint32    `json:"main_pid,omitempty"`
	NRestarts      uint32    `json:"n_restarts"`
	InvocationID   string    `json:"invocation_id,omitempty"`
	ActiveSince    time.Time `json:"active_since,omitzero"` // ActiveEnterTimestamp
	StateSince     time.Time `json:"state_since,omitzero"`  // StateChangeTimestamp
	Gone           bool      `json:"gone,omitempty"`        // unloaded by systemd
	ExecMainPID    uint32    `json:"exec_main_pid,omitempty"`

	// OOMKills counts the kernel OOM kills in the unit seen by this agent
	// (cgroup v1: the memory controller's notification; v2: Result turning
	// oom-kill); OOMKilledPID is the main process at the last one.
	OOMKills     uint32 `json:"oom_kills,omitempty"`
	OOMKilledPID uint32 `json:"oom_killed_pid,omitempty"`
}

// OutOfMemory reports whether the main process last ended by the OOM killer.
func (s State) OutOfMemory() bool {
	if s.Result == "oom-kill" {
		return true
	}
	if s.OOMKilledPID == 0 || s.OOMKilledPID != s.ExecMainPID {
		return false
	}
	// Killed by SIGKILL, or, for a main process that reports its child's
	// end (crun running a container), exit status 128+SIGKILL.
	return s.ExecMainCode == CodeKilled && s.ExecMainStatus == 9 ||
		s.ExecMainCode == CodeExited && s.ExecMainStatus == 128+9
}

// Exit codes systemd uses in ExecMainCode (waitid's si_code).
const (
	CodeExited int32 = 1
	CodeKilled int32 = 2
	CodeDumped int32 = 3
)

// Running reports whether the main process is up.
func (s State) Running() bool { return s.ActiveState == "active" && s.SubState == "running" }

// Failed reports whether systemd gave up on the unit.
func (s State) Failed() bool { return s.ActiveState == "failed" }

// Exit describes how the main process last ended, e.g. "exit code 3" or
// "signal 9", or "" if it has not.
func (s State) Exit() string {
	switch s.ExecMainCode {
	case CodeExited:
		if name, ok := systemdExit[s.ExecMainStatus]; ok {
			return fmt.Sprintf("exit code %d/%s", s.ExecMainStatus, name)
		}
		return fmt.Sprintf("exit code %d", s.ExecMainStatus)
	case CodeKilled, CodeDumped:
		return fmt.Sprintf("signal %d", s.ExecMainStatus)
	}
	return ""
}

// apply merges property values from a GetAll or PropertiesChanged into s;
// it reports whether anything we track changed.
func (s *State) apply(props map[string]dbus.Variant) bool {
	before := *s
	for k, v := range props {
		switch k {
		case "ActiveState":
			storeAs(v, &s.ActiveState)
		case "SubState":
			storeAs(v, &s.SubState)
		case "Result":
			storeAs(v, &s.Result)
		case "ExecMainCode":
			storeAs(v, &s.ExecMainCode)
		case "ExecMainStatus":
			storeAs(v, &s.ExecMainStatus)
		case "MainPID":
			storeAs(v, &s.MainPID)
		case "ExecMainPID":
			storeAs(v, &s.ExecMainPID)
		case "NRestarts":
			storeAs(v, &s.NRestarts)
		case "InvocationID":
			var b []byte
			if storeAs(v, &b) {
				s.InvocationID = hex.EncodeToString(b)
			}
		case "ActiveEnterTimestamp":
			s.ActiveSince = usecTime(v)
		case "StateChangeTimestamp":
			s.StateSince = usecTime(v)
		}
	}
	return before != *s
}

func storeAs[T any](v dbus.Variant, dst *T) bool {
	x, ok := v.Value().(T)
	if ok {
		*dst = x
	}
	return ok
}

func usecTime(v dbus.Variant) time.Time {
	var us uint64
	if !storeAs(v, &us) || us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(us))
}

// stateProperties are the properties a full read fetches.
var unitProps = []string{"ActiveState", "SubState", "InvocationID", "ActiveEnterTimestamp", "StateChangeTimestamp"}
var serviceProps = []string{"Result", "ExecMainCode", "ExecMainStatus", "ExecMainPID", "MainPID", "NRestarts"}

// systemdExit names the exit codes systemd itself uses when it could not
// set up or exec the process (systemd.exec(5), "Process Exit Codes").
var systemdExit = map[int32]string{
	200: "CHDIR", 201: "NICE", 202: "FDS", 203: "EXEC", 204: "MEMORY", 205: "LIMITS",
	206: "OOM_ADJUST", 207: "SIGNAL_MASK", 208: "STDIN", 209: "STDOUT", 210: "CHROOT",
	211: "IOPRIO", 212: "TIMERSLACK", 213: "SECUREBITS", 214: "SETSCHEDULER",
	215: "CPUAFFINITY", 216: "GROUP", 217: "USER", 218: "CAPABILITIES", 219: "CGROUP",
	220: "SETSID", 221: "CONFIRM", 222: "STDERR", 224: "PAM", 225: "NETWORK",
	226: "NAMESPACE", 227: "NO_NEW_PRIVILEGES", 228: "SECCOMP", 229: "SELINUX_CONTEXT",
	230: "PERSONALITY", 231: "APPARMOR_PROFILE", 232: "ADDRESS_FAMILIES",
	233: "RUNTIME_DIRECTORY", 235: "CHOWN", 236: "SMACK_PROCESS_LABEL", 237: "KEYRING",
	238: "STATE_DIRECTORY", 239: "CACHE_DIRECTORY", 240: "LOGS_DIRECTORY",
	241: "CONFIGURATION_DIRECTORY", 242: "NUMA_POLICY", 243: "CREDENTIALS",
}
