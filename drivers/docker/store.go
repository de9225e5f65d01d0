package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/unitvisor/unitvisor/drivers"
)

// Store keeps images in <data_dir>/oci:
//
//	blobs/sha256/<hex>    manifests, configs and compressed layers, content-addressed
//	images/<key>.json     one record per image reference or loaded tarball
//	rootfs/<config hex>/  the unpacked root filesystem of an image, shared
//	                      read-only by every task of that image
//
// Fetches (pulls and loads) run in the background, one per image, so a
// slow registry never holds up the agent; their progress can be read while
// they run.
type Store struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	fetches map[string]*fetch // by image key
}

// NewStore opens (creating) the image store under dir.
func NewStore(dir string, log *slog.Logger) (*Store, error) {
	for _, sub := range []string{"blobs/sha256", "images", "rootfs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	// rootfs/ must be traversable: containers run as any user.
	if err := os.Chmod(filepath.Join(dir, "rootfs"), 0o711); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	// Leftovers of fetches that an agent crash interrupted.
	entries, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, "tmp", e.Name()))
	}
	return &Store{dir: dir, log: log, fetches: map[string]*fetch{}}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Source says where an image comes from: a registry reference with its
// credentials, or a tarball on this machine.
type Source struct {
	Ref  string              // registry reference, as written in the job
	Auth authn.Authenticator // nil: anonymous
	Load string              // tarball path, instead of Ref
}

// Key identifies the image of a source in the store: the normalized
// reference ("image:index.docker.io/library/busybox:latest") or the
// tarball path ("load:/srv/app.tar").
func (src Source) Key() (string, error) {
	if src.Load != "" {
		return "load:" + filepath.Clean(src.Load), nil
	}
	ref, err := name.ParseReference(src.Ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", src.Ref, err)
	}
	return "image:" + ref.Name(), nil
}

// What names the source in messages.
func (src Source) What() string {
	if src.Load != "" {
		return "image tarball " + src.Load
	}
	return "image " + src.Ref
}

// Record is what the store keeps about one image.
type Record struct {
	Key      string    `json:"key"`
	Manifest string    `json:"manifest"` // digest
	Config   string    `json:"config"`   // digest: the image ID
	Layers   []string  `json:"layers"`   // digests, bottom first
	Size     int64     `json:"size"`     // compressed bytes of the layers
	Fetched  time.Time `json:"fetched"`
	// Stamp is the size and mtime of a loaded tarball: when they change,
	// the tarball is loaded again.
	Stamp string `json:"stamp,omitempty"`
}

// ID is the hex of the config digest: the name of the image's rootfs.
func (r Record) ID() string { return strings.TrimPrefix(r.Config, "sha256:") }

// Image is a stored, unpacked image ready to run.
type Image struct {
	Record
	Rootfs string        // the shared unpacked root filesystem
	Config v1.ConfigFile // Env, Cmd, Entrypoint, User, WorkingDir...
}

// fetch is one pull or load in progress, or ended.
type fetch struct {
	src   Source
	done  chan struct{}
	phase atomic.Pointer[string]
	total atomic.Int64 // bytes to download, once known
	got   atomic.Int64
	err   error // set before done is closed
}

func (f *fetch) progress() string {
	phase := *f.phase.Load()
	if total := f.total.Load(); total > 0 && strings.HasPrefix(phase, "pulling") {
		return fmt.Sprintf("%s: %s/%s MiB", phase, mib(f.got.Load()), mib(total))
	}
	return phase
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

func (f *fetch) setPhase(p string) { f.phase.Store(&p) }

// Get returns the image of src when it is stored and unpacked. Otherwise
// it starts fetching it (unless a fetch runs) and returns a
// *drivers.NotReadyError; when the fetch failed, it returns that error
// once, and the next call fetches again.
func (s *Store) Get(ctx context.Context, src Source) (Image, error) {
	key, err := src.Key()
	if err != nil {
		return Image{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.fetches[key]; ok {
		select {
		case <-f.done:
			delete(s.fetches, key)
			if f.err != nil {
				return Image{}, f.err
			}
		default:
			return Image{}, &drivers.NotReadyError{Progress: f.progress, Ready: f.done}
		}
	}
	if img, ok, err := s.lookup(key, src); err != nil {
		return Image{}, err
	} else if ok {
		return img, nil
	}
	f := &fetch{src: src, done: make(chan struct{})}
	f.setPhase("waiting to fetch " + src.What())
	s.fetches[key] = f
	go func() {
		defer close(f.done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		began := time.Now()
		f.err = s.fetch(ctx, key, f)
		if f.err != nil {
			s.log.Error("fetch image", "image", key, "err", f.err)
		} else {
			s.log.Info("image ready", "image", key, "took", time.Since(began).Round(time.Millisecond))
		}
	}()
	return Image{}, &drivers.NotReadyError{Progress: f.progress, Ready: f.done}
}

// fetchTimeout bounds one pull or load.
const fetchTimeout = 30 * time.Minute

// Progress returns the phase of a running fetch of src ("" if none).
func (s *Store) Progress(src Source) string {
	key, err := src.Key()
	if err != nil {
		return ""
	}
	s.mu.Lock()
	f, ok := s.fetches[key]
	s.mu.Unlock()
	if !ok {
		return ""
	}
	return f.progress()
}

// lookup reads the record of key and checks that its rootfs exists; for a
// tarball, also that the tarball did not change.
func (s *Store) lookup(key string, src Source) (Image, bool, error) {
	rec, ok, err := s.record(key)
	if err != nil || !ok {
		return Image{}, false, err
	}
	if src.Load != "" {
		if stamp, err := fileStamp(src.Load); err != nil {
			return Image{}, false, fmt.Errorf("image tarball: %w", err)
		} else if stamp != rec.Stamp {
			return Image{}, false, nil
		}
	}
	return s.image(rec)
}

// image opens a record's config and rootfs.
func (s *Store) image(rec Record) (Image, bool, error) {
	rootfs := filepath.Join(s.dir, "rootfs", rec.ID())
	if _, err := os.Stat(rootfs); err != nil {
		return Image{}, false, nil
	}
	raw, err := os.ReadFile(s.blobPath(rec.Config))
	if err != nil {
		return Image{}, false, nil
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return Image{}, false, fmt.Errorf("image %s: config: %w", rec.Key, err)
	}
	now := time.Now()
	os.Chtimes(s.recordPath(rec.Key), now, now) // last use, for GC
	return Image{Record: rec, Rootfs: rootfs, Config: *cfg}, true, nil
}

func fileStamp(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Size(), st.ModTime().UnixNano()), nil
}

func (s *Store) recordPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.dir, "images", hex.EncodeToString(sum[:12])+".json")
}

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (s *Store) record(key string) (Record, bool, error) {
	b, err := os.ReadFile(s.recordPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("image store: %w", err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Key != key {
		return Record{}, false, nil // damaged: fetch again
	}
	return rec, true, nil
}

func (s *Store) putRecord(rec Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.recordPath(rec.Key), b, 0o600)
}

// Records returns every image record.
func (s *Store) Records() ([]Record, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	var out []Record
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "images", e.Name()))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) == nil {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// fetch pulls or loads the image of f.src, stores its blobs, unpacks its
// rootfs (unless an image with the same config already did) and writes its
// record last, so that a record always means a complete image.
func (s *Store) fetch(ctx context.Context, key string, f *fetch) error {
	var img v1.Image
	var stamp string
	var cleanup func()
	if f.src.Load != "" {
		f.setPhase("loading " + f.src.What())
		var err error
		if stamp, err = fileStamp(f.src.Load); err != nil {
			return fmt.Errorf("load %s: %w", f.src.What(), err)
		}
		img, cleanup, err = loadTarball(f.src.Load, filepath.Join(s.dir, "tmp"))
		if err != nil {
			return fmt.Errorf("load %s: %w", f.src.What(), err)
		}
		defer cleanup()
	} else {
		f.setPhase("pulling " + f.src.What())
		ref, err := name.ParseReference(f.src.Ref)
		if err != nil {
			return fmt.Errorf("image %q: %w", f.src.Ref, err)
		}
		auth := f.src.Auth
		if auth == nil {
			auth = authn.Anonymous
		}
		img, err = remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth),
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
		if err != nil {
			return pullError(f.src, err)
		}
	}
	rec, err := s.storeBlobs(img, f)
	if err != nil {
		if f.src.Load == "" {
			return pullError(f.src, err)
		}
		return fmt.Errorf("load %s: %w", f.src.What(), err)
	}
	rec.Key, rec.Stamp, rec.Fetched = key, stamp, time.Now().UTC()
	f.setPhase("unpacking " + f.src.What())
	if err := s.unpack(rec); err != nil {
		return fmt.Errorf("unpack %s: %w", f.src.What(), err)
	}
	return s.putRecord(rec)
}

// pullError turns a registry error into what the user should check.
func pullError(src Source, err error) error {
	msg := err.Error()
	hint := "check the image name and that the registry is reachable"
	switch {
	case strings.Contains(msg, "UNAUTHORIZED") || strings.Contains(msg, "DENIED") || strings.Contains(msg, "401"):
		hint = "the registry refused the credentials: check auth in the task's config"
	case strings.Contains(msg, "MANIFEST_UNKNOWN") || strings.Contains(msg, "NAME_UNKNOWN") || strings.Contains(msg, "404"):
		hint = "the registry has no such image or tag: check the image name"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout"):
		hint = "the registry is unreachable: check its address and the network"
	}
	return fmt.Errorf("pull %s: %w (%s)", src.What(), err, hint)
}

// storeBlobs writes the manifest, config and layers of img as blobs and
// returns the record (without key) that describes them. Layers already
// stored are not fetched again.
func (s *Store) storeBlobs(img v1.Image, f *fetch) (Record, error) {
	rawManifest, err := img.RawManifest()
	if err != nil {
		return Record{}, fmt.Errorf("manifest: %w", err)
	}
	manifestDigest, err := img.Digest()
	if err != nil {
		return Record{}, fmt.Errorf("manifest: %w", err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return Record{}, fmt.Errorf("config: %w", err)
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return Record{}, fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return Record{}, fmt.Errorf("layers: %w", err)
	}
	rec := Record{Manifest: manifestDigest.String(), Config: configDigest.String()}
	type todo struct {
		layer  v1.Layer
		digest v1.Hash
	}
	var missing []todo
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return Record{}, fmt.Errorf("layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return Record{}, fmt.Errorf("layer size: %w", err)
		}
		rec.Layers = append(rec.Layers, d.String())
		rec.Size += size
		if _, err := os.Stat(s.blobPath(d.String())); err != nil {
			missing = append(missing, todo{l, d})
			f.total.Add(size)
		}
	}
	for _, m := range missing {
		rc, err := m.layer.Compressed()
		if err != nil {
			return Record{}, fmt.Errorf("layer %s: %w", m.digest, err)
		}
		err = s.writeBlob(m.digest, &countingReader{r: rc, n: &f.got})
		rc.Close()
		if err != nil {
			return Record{}, fmt.Errorf("layer %s: %w", m.digest, err)
		}
	}
	if err := s.writeBlob(configDigest, bytes.NewReader(rawConfig)); err != nil {
		return Record{}, fmt.Errorf("config: %w", err)
	}
	if err := s.writeBlob(manifestDigest, bytes.NewReader(rawManifest)); err != nil {
		return Record{}, fmt.Errorf("manifest: %w", err)
	}
	return rec, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// writeBlob stores r under its digest, checking that the content has it.
func (s *Store) writeBlob(digest v1.Hash, r io.Reader) error {
	if digest.Algorithm != "sha256" {
		return fmt.Errorf("digest %s: only sha256 is supported", digest)
	}
	final := s.blobPath(digest.String())
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "blob-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest.Hex {
		return fmt.Errorf("content has digest sha256:%s, want %s", got, digest)
	}
	return os.Rename(tmp.Name(), final)
}

// writeAtomic writes a file through a temporary one and a rename.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
