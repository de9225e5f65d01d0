package drivers

// NotReadyError is returned by a driver's Prepare when an instance cannot
// start yet because the driver is still fetching what it needs (the
// docker driver pulling an image). The supervisor shows the instance as
// pending with Progress() as its detail, and prepares it again once Ready
// is closed; a fetch that failed makes the next Prepare return its error.
type NotReadyError struct {
	Progress func() string   // e.g. "pulling image busybox:1.36: 12.0/20.3 MiB"
	Ready    <-chan struct{} // closed when the fetch has ended, well or not
}

func (e *NotReadyError) Error() string { return "not ready: " + e.Progress() }
