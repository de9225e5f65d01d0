package supervisor

import (
	"time"

	"github.com/unitvisor/unitvisor/units"
)

// JobStatus is a job and the state of each of its task instances.
type JobStatus struct {
	Name      string           `json:"name"`
	Version   uint64           `json:"version"`
	Stopped   bool             `json:"stopped"`
	Submitted time.Time        `json:"submitted"`
	Instances []InstanceStatus `json:"instances"`
}

// InstanceStatus is one task instance: its unit and what systemd says.
type InstanceStatus struct {
	Task    string         `json:"task"`
	Index   int            `json:"index"`
	Driver  string         `json:"driver"`
	Unit    string         `json:"unit"`
	Status  string         `json:"status"` // pending, starting, running, restarting, complete, failed, stopping, dead, error
	Detail  string         `json:"detail,omitempty"`
	Ports   map[string]int `json:"ports,omitempty"`
	RetryAt time.Time      `json:"retry_at,omitzero"`
	State   *units.State   `json:"state,omitempty"`
	Usage   *units.Usage   `json:"usage,omitempty"` // while active
}

// Instance statuses.
const (
	StatusPending    = "pending"
	StatusStarting   = "starting"
	StatusRunning    = "running"
	StatusRestarting = "restarting"
	StatusComplete   = "complete"
	StatusFailed     = "failed"
	StatusStopping   = "stopping"
	StatusDead       = "dead"
	StatusError      = "error"
)

// Summarize is the status `job status` shows for an instance whose unit is
// in state st (one of the Status constants, never pending or error).
func Summarize(st units.State) string {
	status, _ := summarize(st)
	return status
}

// summarize turns a unit state into a Nomad-like instance status.
func summarize(st units.State) (status, detail string) {
	detail = st.Exit()
	if st.OutOfMemory() {
		detail = "out of memory (" + detail + ")"
	}
	if st.Result != "" && st.Result != "success" {
		if detail != "" {
			detail += ", "
		}
		detail += "result " + st.Result
	}
	switch {
	case st.Running():
		return StatusRunning, ""
	case st.ActiveState == "active" && st.SubState == "exited":
		if st.ExecMainCode == units.CodeExited && st.ExecMainStatus == 0 {
			return StatusComplete, "exit code 0"
		}
		return StatusFailed, detail
	case st.ActiveState == "activating" && st.SubState == "auto-restart":
		return StatusRestarting, detail
	case st.ActiveState == "activating" || st.ActiveState == "reloading":
		return StatusStarting, ""
	case st.Failed():
		return StatusFailed, detail
	case st.ActiveState == "deactivating":
		return StatusStopping, ""
	}
	return StatusDead, detail
}

// Done reports whether an instance status will not change by itself
// toward running (for `job run` to stop waiting).
func (i InstanceStatus) Done() bool {
	switch i.Status {
	case StatusRunning, StatusComplete, StatusFailed, StatusError, StatusDead:
		return true
	}
	return false
}

// OK reports whether the instance came up as wanted.
func (i InstanceStatus) OK() bool { return i.Status == StatusRunning || i.Status == StatusComplete }
