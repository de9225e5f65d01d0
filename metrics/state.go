package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// savedState is the state file: the counters of each instance, so they
// do not go backwards when the agent restarts. systemd's NRestarts of a
// running unit survives the agent, but not the unit being replaced, and
// the watcher's OOM kill count lives in the agent's memory only.
type savedState struct {
	Version   int             `json:"version"`
	Instances []savedInstance `json:"instances"`
}

type savedInstance struct {
	Job       string  `json:"job"`
	Task      string  `json:"task"`
	Index     int     `json:"index"`
	Restarts  counter `json:"restarts"`
	OOMEvents counter `json:"oom_events"`
	OOMCgroup counter `json:"oom_cgroup"`
	Exit      *int    `json:"last_exit_code,omitempty"`
}

const stateVersion = 1

// load reads the state file, if there is one.
func (m *Metrics) load() error {
	if m.cfg.StateFile == "" {
		return nil
	}
	b, err := os.ReadFile(m.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read metrics state: %w", err)
	}
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("read metrics state %s: %w", m.cfg.StateFile, err)
	}
	if s.Version != stateVersion {
		return fmt.Errorf("read metrics state %s: version %d, want %d", m.cfg.StateFile, s.Version, stateVersion)
	}
	for _, si := range s.Instances {
		in := &instance{restarts: si.Restarts, oomEvents: si.OOMEvents, oomCgroup: si.OOMCgroup}
		if si.Exit != nil {
			in.exit, in.hasExit = *si.Exit, true
		}
		m.insts[key{si.Job, si.Task, si.Index}] = in
	}
	return nil
}

// flush writes the state file when counters changed since the last write
// (at most once a second, from Run; a kill -9 loses at most that second).
func (m *Metrics) flush() {
	if m.cfg.StateFile == "" {
		return
	}
	m.mu.Lock()
	if !m.dirty {
		m.mu.Unlock()
		return
	}
	s := savedState{Version: stateVersion, Instances: make([]savedInstance, 0, len(m.insts))}
	for k, in := range m.insts {
		si := savedInstance{Job: k.job, Task: k.task, Index: k.index,
			Restarts: in.restarts, OOMEvents: in.oomEvents, OOMCgroup: in.oomCgroup}
		if in.hasExit {
			code := in.exit
			si.Exit = &code
		}
		s.Instances = append(s.Instances, si)
	}
	m.dirty = false
	m.mu.Unlock()
	if err := writeAtomic(m.cfg.StateFile, s); err != nil {
		m.log.Error("metrics: save counters", "err", err)
		m.mu.Lock()
		m.dirty = true
		m.mu.Unlock()
	}
}

func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
