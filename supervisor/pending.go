package supervisor

import (
	"context"
	"errors"

	"github.com/unitvisor/unitvisor/drivers"
)

// noteStart records the outcome of starting a unit for status: a start
// error, or, when its driver is still fetching what the instance needs
// (drivers.NotReadyError), the fetch's progress; then the supervisor
// reconciles again as soon as the fetch ends. It returns err, or nil for
// a not-ready instance, which is no failure.
func (s *Supervisor) noteStart(ctx context.Context, name string, err error) error {
	var nr *drivers.NotReadyError
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.As(err, &nr):
		delete(s.errs, name)
		if _, ok := s.waiting[name]; !ok {
			s.log.Info("waiting for the driver to fetch what the task needs", "unit", name, "progress", nr.Progress())
		}
		s.waiting[name] = nr.Progress
		go func() {
			select {
			case <-nr.Ready:
				s.Kick()
			case <-ctx.Done():
			}
		}()
		return nil
	case err != nil:
		delete(s.waiting, name)
		s.errs[name] = err.Error()
	default:
		delete(s.waiting, name)
		delete(s.errs, name)
	}
	return err
}
