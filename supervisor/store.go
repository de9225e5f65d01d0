package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/units"
)

// JobRecord is a submitted job as the store keeps it.
type JobRecord struct {
	Job       *jobspec.Job `json:"job"`
	File      string       `json:"file"`   // name it was submitted as
	Source    string       `json:"source"` // the job file, verbatim
	Version   uint64       `json:"version"`
	Submitted time.Time    `json:"submitted"`
	Stopped   bool         `json:"stopped"`
}

// UnitRecord is what the agent remembers about a unit it started: enough to
// adopt it after a restart (the task hash) and to keep its ports. No PIDs.
type UnitRecord struct {
	Unit  string         `json:"unit"`
	Job   string         `json:"job"`
	Task  string         `json:"task"`
	Index int            `json:"index"`
	Hash  string         `json:"hash"`
	Ports map[string]int `json:"ports,omitempty"`
	CPUs  string         `json:"cpus,omitempty"` // dedicated cores picked by the agent
	// Final is the last state seen before the job was stopped.
	Final *units.State `json:"final,omitempty"`
}

var (
	bucketJobs  = []byte("jobs")
	bucketUnits = []byte("units")
)

// Store keeps desired state in a bbolt file in the data dir. bbolt's file
// lock also keeps a second agent off the same data dir.
type Store struct {
	db *bolt.DB
}

// OpenStore opens (creating) dataDir/state.db.
func OpenStore(dataDir string) (*Store, error) {
	path := filepath.Join(dataDir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: another agent is using this data dir", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketUnits} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func put[T any](tx *bolt.Tx, bucket []byte, key string, v T) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(key), b)
}

func all[T any](s *Store, bucket []byte) ([]T, error) {
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			var x T
			if err := json.Unmarshal(v, &x); err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read store: %w", err)
	}
	return out, nil
}

// Jobs returns all job records.
func (s *Store) Jobs() ([]JobRecord, error) { return all[JobRecord](s, bucketJobs) }

// Units returns all unit records.
func (s *Store) Units() ([]UnitRecord, error) { return all[UnitRecord](s, bucketUnits) }

// Job returns one job record.
func (s *Store) Job(name string) (JobRecord, bool, error) {
	var rec JobRecord
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketJobs).Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &rec)
	})
	if err != nil {
		return rec, false, fmt.Errorf("read job %s: %w", name, err)
	}
	return rec, found, nil
}

// PutJob stores a job record.
func (s *Store) PutJob(rec JobRecord) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return put(tx, bucketJobs, rec.Job.Name, rec) })
	if err != nil {
		return fmt.Errorf("store job %s: %w", rec.Job.Name, err)
	}
	return nil
}

// DeleteJob removes a job and its unit records.
func (s *Store) DeleteJob(name string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketJobs).Delete([]byte(name)); err != nil {
			return err
		}
		ub := tx.Bucket(bucketUnits)
		c := ub.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r UnitRecord
			if json.Unmarshal(v, &r) == nil && r.Job == name {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete job %s: %w", name, err)
	}
	return nil
}

// PutUnits stores several unit records in one transaction (one fsync).
func (s *Store) PutUnits(recs []UnitRecord) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range recs {
			if err := put(tx, bucketUnits, r.Unit, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store units: %w", err)
	}
	return nil
}

// PutUnit stores a unit record.
func (s *Store) PutUnit(rec UnitRecord) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return put(tx, bucketUnits, rec.Unit, rec) })
	if err != nil {
		return fmt.Errorf("store unit %s: %w", rec.Unit, err)
	}
	return nil
}

// DeleteUnit forgets a unit.
func (s *Store) DeleteUnit(unit string) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketUnits).Delete([]byte(unit)) })
	if err != nil {
		return fmt.Errorf("delete unit %s: %w", unit, err)
	}
	return nil
}
