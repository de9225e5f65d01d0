package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/unitvisor/unitvisor/jobspec"
)

// Keys returns the store keys of the images the docker tasks among tasks
// use: what GC must keep.
func Keys(tasks []*jobspec.Task) map[string]bool {
	keep := map[string]bool{}
	for _, t := range tasks {
		if t.Driver != "docker" {
			continue
		}
		src := Source{Ref: t.Config.Image, Load: t.Config.Load}
		if key, err := src.Key(); err == nil {
			keep[key] = true
		}
	}
	return keep
}

// GCResult says what a collection removed and what the store holds after.
type GCResult struct {
	Images []string // keys of the removed images
	Blobs  int      // removed blobs
	Rootfs int      // removed unpacked root filesystems
}

// GC removes the images whose keys are not in keep and that were not used
// (by a task start) within grace, then every blob and rootfs that no
// remaining image references. A rootfs mounted as an overlay's lower
// layer is kept. Nothing is collected while a fetch runs.
func (s *Store) GC(keep map[string]bool, grace time.Duration) (GCResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res GCResult
	for _, f := range s.fetches {
		select {
		case <-f.done:
		default:
			return res, nil
		}
	}
	recs, err := s.Records()
	if err != nil {
		return res, err
	}
	blobs, rootfs := map[string]bool{}, map[string]bool{}
	var errs []error
	for _, rec := range recs {
		p := s.recordPath(rec.Key)
		if !keep[rec.Key] {
			if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) >= grace {
				if err := os.Remove(p); err != nil {
					errs = append(errs, err)
				} else {
					res.Images = append(res.Images, rec.Key)
					continue
				}
			}
		}
		for _, d := range append([]string{rec.Manifest, rec.Config}, rec.Layers...) {
			blobs[strings.TrimPrefix(d, "sha256:")] = true
		}
		rootfs[rec.ID()] = true
	}
	blobDir := filepath.Join(s.dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobDir)
	if err != nil {
		return res, fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		if !blobs[e.Name()] {
			if err := os.Remove(filepath.Join(blobDir, e.Name())); err != nil {
				errs = append(errs, err)
			} else {
				res.Blobs++
			}
		}
	}
	mounted := MountedLowers()
	rootDir := filepath.Join(s.dir, "rootfs")
	entries, err = os.ReadDir(rootDir)
	if err != nil {
		return res, fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(rootDir, e.Name())
		if rootfs[e.Name()] || mounted[p] {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		} else {
			res.Rootfs++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("image store gc: %w", err)
	}
	return res, nil
}
