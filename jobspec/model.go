// Package jobspec owns the job file format: HCL2 (and the same structure in
// JSON) parsed into the Job model, validation with file:line:col diagnostics,
// and the ${UNITVISOR_*} interpolation that unitvisor (never systemd) performs.
//
// It knows nothing of systemd, Consul or the agent.
package jobspec

import "time"

// Job is a named set of tasks submitted together.
type Job struct {
	Name  string  `json:"name"`
	Tasks []*Task `json:"tasks"`
}

// Task is one program run as Count identical instances, each its own unit.
type Task struct {
	Name   string            `json:"name"`
	Driver string            `json:"driver"`
	Count  int               `json:"count"` // 1 to 1000, default 1
	Config Config            `json:"config"`
	Env    map[string]string `json:"env,omitempty"`   // values may contain ${UNITVISOR_*}
	Ports  []Port            `json:"ports,omitempty"` // labels unique in the task
	User   string            `json:"user,omitempty"`  // user name or numeric uid, optional

	Restart     RestartPolicy `json:"restart"`
	KillSignal  string        `json:"kill_signal"`  // canonical name, e.g. "SIGTERM"
	KillTimeout time.Duration `json:"kill_timeout"` // > 0 after defaults

	Resources *Resources `json:"resources,omitempty"` // nil: no limits

	// Services are registered in Consul while an instance runs.
	Services []Service `json:"services,omitempty"`
	// ShutdownDelay is waited after deregistering the services of an
	// instance and before stopping it, so clients stop using it first.
	ShutdownDelay time.Duration `json:"shutdown_delay,omitempty"`

	// Pos holds "file:line:col" of attributes by path ("driver",
	// "resources.memory", ...) and of the task block (""), so that checks
	// only the agent can make still point into the file. Not stored.
	Pos map[string]string `json:"-"`
}

// At returns "file:line:col" of the attribute at path, or of the task.
func (t *Task) At(path string) string {
	if p, ok := t.Pos[path]; ok {
		return p
	}
	return t.Pos[""]
}

// Resources are what a task instance may use; systemd enforces them. A
// zero field is unset.
type Resources struct {
	CPU         int      `json:"cpu,omitempty"`        // relative share; 100 = systemd's default CPUWeight
	CPULimit    int      `json:"cpu_limit,omitempty"`  // hard quota, percent of one CPU ("150%")
	Cores       int      `json:"cores,omitempty"`      // dedicated CPUs, picked by the agent
	CPUSet      string   `json:"cpuset,omitempty"`     // explicit CPUs, e.g. "0-1,3"
	MemoryMB    int      `json:"memory,omitempty"`     // MiB: the hard limit, or the reservation with MemoryMaxMB
	MemoryMaxMB int      `json:"memory_max,omitempty"` // MiB: the hard limit when set
	SwapMB      int      `json:"swap,omitempty"`       // MiB of swap on top of memory
	Pids        int      `json:"pids,omitempty"`       // most processes and threads
	IOWeight    int      `json:"io_weight,omitempty"`  // 1-10000, default 100
	Devices     []string `json:"devices,omitempty"`    // allow list: "/dev/fuse" or "/dev/fuse rw"
}

// MemoryLimitMB is the hard memory limit (0: none).
func (r *Resources) MemoryLimitMB() int {
	if r.MemoryMaxMB > 0 {
		return r.MemoryMaxMB
	}
	return r.MemoryMB
}

// Config is the driver configuration of a task. Fields belong to drivers;
// validation checks that only the fields of the task's driver are set.
// Command and Args may contain ${UNITVISOR_*} references, see Interpolate.
type Config struct {
	// exec, raw_exec
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"` // also java (program args) and qemu (extra qemu args)

	// java: run JarPath, or Class from ClassPath
	JarPath    string   `json:"jar_path,omitempty"`
	Class      string   `json:"class,omitempty"`
	ClassPath  string   `json:"class_path,omitempty"` // ":"-separated
	JVMOptions []string `json:"jvm_options,omitempty"`
	JavaHome   string   `json:"java_home,omitempty"`

	// qemu
	ImagePath        string         `json:"image_path,omitempty"`
	Accelerator      string         `json:"accelerator,omitempty"` // "kvm" or "tcg"; "" = best available
	Machine          string         `json:"machine,omitempty"`
	PortMap          map[string]int `json:"port_map,omitempty"` // port label -> guest port
	GracefulShutdown bool           `json:"graceful_shutdown,omitempty"`

	// docker: an image from a registry, or loaded from a tarball; see
	// jobspec/docker.go. Args (above) replace the image's Cmd.
	Image          string        `json:"image,omitempty"`      // registry reference
	Load           string        `json:"load,omitempty"`       // docker save / OCI layout tarball
	Entrypoint     []string      `json:"entrypoint,omitempty"` // replaces the image's
	WorkDir        string        `json:"work_dir,omitempty"`   // in the container
	Volumes        []Volume      `json:"volumes,omitempty"`    // host path -> container path
	ReadonlyRootfs bool          `json:"readonly_rootfs,omitempty"`
	NetworkMode    string        `json:"network_mode,omitempty"` // "host" (default) or "none"
	Auth           *RegistryAuth `json:"auth,omitempty"`
	CapAdd         []string      `json:"cap_add,omitempty"`  // canonical "CAP_X", or "ALL"
	CapDrop        []string      `json:"cap_drop,omitempty"` // canonical "CAP_X", or "ALL"
	Init           bool          `json:"init,omitempty"`     // a minimal init as PID 1
}

// Port is a named port; Static 0 means the agent picks one from its range.
type Port struct {
	Label  string `json:"label"`
	Static int    `json:"static,omitempty"`
}

// Restart modes, as in Nomad.
const (
	RestartModeFail  = "fail"
	RestartModeDelay = "delay"
)

// RestartPolicy says how often a failing task is restarted: at most Attempts
// restarts within Interval, Delay apart; then Mode decides. The defaults are
// Nomad's: 2 attempts in 30m, 15s apart, mode "fail".
type RestartPolicy struct {
	Attempts int           `json:"attempts"`
	Interval time.Duration `json:"interval"`
	Delay    time.Duration `json:"delay"`
	Mode     string        `json:"mode"`
}

// Service is a Consul service registered for every instance of a task.
// Tags, Meta values, Address and the checks' Path, Command and Args may
// contain ${UNITVISOR_*} references.
type Service struct {
	Name              string            `json:"name"`           // DNS-compatible
	Port              string            `json:"port,omitempty"` // a port label of the task
	Tags              []string          `json:"tags,omitempty"`
	Meta              map[string]string `json:"meta,omitempty"`
	Address           string            `json:"address,omitempty"` // default: Consul's node address
	EnableTagOverride bool              `json:"enable_tag_override,omitempty"`
	Checks            []Check           `json:"checks"` // at least one: a ttl check by default
}

// Check types.
const (
	CheckTTL    = "ttl"    // health follows the unit's state, pushed by the agent
	CheckHTTP   = "http"   // run by Consul against the task's port
	CheckTCP    = "tcp"    // run by Consul against the task's port
	CheckScript = "script" // run by the agent in the task's context, result pushed
)

// Check is a health check of a service. Names are unique within a service.
type Check struct {
	Name          string        `json:"name"`
	Type          string        `json:"type"`
	Port          string        `json:"port,omitempty"`     // http, tcp: a port label; default the service's
	Path          string        `json:"path,omitempty"`     // http
	Method        string        `json:"method,omitempty"`   // http
	Protocol      string        `json:"protocol,omitempty"` // http: "http" or "https"
	TLSSkipVerify bool          `json:"tls_skip_verify,omitempty"`
	Command       string        `json:"command,omitempty"` // script: an absolute path
	Args          []string      `json:"args,omitempty"`    // script
	Interval      time.Duration `json:"interval,omitempty"`
	Timeout       time.Duration `json:"timeout,omitempty"`
	CheckRestart  *CheckRestart `json:"check_restart,omitempty"`
}

// CheckRestart restarts a task after Limit consecutive critical results of
// a check; results within Grace of the task's start do not count.
type CheckRestart struct {
	Limit int           `json:"limit"`
	Grace time.Duration `json:"grace"`
}
