package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// unpack applies the layers of rec, bottom first, whiteouts included,
// into rootfs/<config hex>, unless that exists: images with the same
// config share one rootfs. It is built in tmp/ and renamed into place, so
// a rootfs that exists is complete.
func (s *Store) unpack(rec Record) error {
	final := filepath.Join(s.dir, "rootfs", rec.ID())
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	img, err := partial.CompressedToImage(&storedImage{s: s, rec: rec})
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i+1, err)
		}
		err = extractTar(rc, tmp)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i+1, err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr == nil {
			return nil // another reference to the same image got there first
		}
		return err
	}
	return nil
}

// storedImage is an image read back from the store's blobs.
type storedImage struct {
	s   *Store
	rec Record
}

func (i *storedImage) RawConfigFile() ([]byte, error) { return os.ReadFile(i.s.blobPath(i.rec.Config)) }
func (i *storedImage) RawManifest() ([]byte, error)   { return os.ReadFile(i.s.blobPath(i.rec.Manifest)) }

func (i *storedImage) MediaType() (types.MediaType, error) {
	m, err := partial.Manifest(i)
	if err != nil {
		return "", err
	}
	if m.MediaType != "" {
		return m.MediaType, nil
	}
	return types.OCIManifestSchema1, nil
}

func (i *storedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	m, err := partial.Manifest(i)
	if err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.Digest == h {
			return &storedLayer{s: i.s, desc: l}, nil
		}
	}
	if m.Config.Digest == h {
		return &storedLayer{s: i.s, desc: m.Config}, nil
	}
	return nil, fmt.Errorf("blob %s is not in the manifest", h)
}

type storedLayer struct {
	s    *Store
	desc v1.Descriptor
}

func (l *storedLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *storedLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *storedLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *storedLayer) Compressed() (io.ReadCloser, error) {
	return os.Open(l.s.blobPath(l.desc.Digest.String()))
}

// Whiteouts (OCI image spec): ".wh.NAME" removes NAME of the layers
// below, ".wh..wh..opq" in a directory hides everything the layers below
// put there.
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// extractTar applies one layer to the filesystem in dir. Every path is
// resolved inside dir (os.Root): an entry or a symlink of the image cannot
// reach outside ("../x" is dir/x; a path through a symlink that leaves dir
// is an error). Owners, modes, times and file capabilities (xattrs) are
// kept; device nodes and FIFOs are skipped (the runtime makes /dev).
func extractTar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type link struct{ target, name string }
	var links []link
	type dirMeta struct {
		name string
		hdr  *tar.Header
	}
	var dirs []dirMeta
	mine := map[string]bool{} // paths this layer wrote
	var opaque []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		name := cleanEntry(hdr.Name)
		if name == "." {
			continue
		}
		parent, base := path.Dir(name), path.Base(name)
		if base == opaqueWhiteout {
			opaque = append(opaque, parent)
			continue
		}
		if hidden, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
			if err := root.RemoveAll(path.Join(parent, hidden)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("whiteout %s: %w", name, err)
			}
			continue
		}
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		mine[name] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if st, err := root.Lstat(name); err == nil && !st.IsDir() {
				root.Remove(name)
			}
			if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: %w", name, err)
			}
			// Mode and owner last: a read-only directory must still take
			// its entries.
			dirs = append(dirs, dirMeta{name, hdr})
			continue
		case tar.TypeReg:
			if err := replace(root, name); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			_, err = io.Copy(f, tr)
			if err == nil {
				err = setXattrs(f, hdr)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := replace(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			continue
		case tar.TypeLink:
			links = append(links, link{cleanEntry(hdr.Linkname), name})
			continue
		default:
			continue
		}
		if err := setMeta(root, name, hdr); err != nil {
			return err
		}
	}
	for _, d := range opaque {
		if err := clearBelow(root, d, mine); err != nil {
			return err
		}
	}
	for _, l := range links {
		if err := replace(root, l.name); err != nil {
			return err
		}
		if err := root.Link(l.target, l.name); err != nil {
			return fmt.Errorf("hard link %s -> %s: %w", l.name, l.target, err)
		}
	}
	// Deepest first, so that a parent's mode never blocks a child.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := setMeta(root, dirs[i].name, dirs[i].hdr); err != nil {
			return err
		}
	}
	return nil
}

// clearBelow removes what lower layers put in dir: every entry that this
// layer (keep) did not write, and below kept directories, the same.
func clearBelow(root *os.Root, dir string, keep map[string]bool) error {
	f, err := root.Open(dir)
	if err != nil {
		return nil
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("opaque %s: %w", dir, err)
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if p == "." || strings.HasPrefix(p, "../") {
			continue
		}
		switch {
		case !keep[p]:
			if err := root.RemoveAll(p); err != nil {
				return fmt.Errorf("opaque %s: %w", p, err)
			}
		case e.IsDir():
			if err := clearBelow(root, p, keep); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanEntry makes a tar entry name relative to the root: "./a/../b" is "b".
func cleanEntry(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// replace removes what is at name, unless it is a directory.
func replace(root *os.Root, name string) error {
	st, err := root.Lstat(name)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		return root.RemoveAll(name)
	}
	return root.Remove(name)
}

// setMeta sets owner, mode (with setuid, setgid, sticky) and times.
func setMeta(root *os.Root, name string, hdr *tar.Header) error {
	if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	mode := fs.FileMode(hdr.Mode).Perm()
	if hdr.Mode&04000 != 0 {
		mode |= fs.ModeSetuid
	}
	if hdr.Mode&02000 != 0 {
		mode |= fs.ModeSetgid
	}
	if hdr.Mode&01000 != 0 {
		mode |= fs.ModeSticky
	}
	// After chown, which clears setuid bits.
	if err := root.Chmod(name, mode); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !hdr.ModTime.IsZero() {
		atime := hdr.AccessTime
		if atime.IsZero() {
			atime = hdr.ModTime
		}
		if err := root.Chtimes(name, atime, hdr.ModTime); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// setXattrs applies the entry's extended attributes (file capabilities
// such as ping's cap_net_raw live there).
func setXattrs(f *os.File, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if err := unix.Fsetxattr(int(f.Fd()), attr, []byte(v), 0); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("xattr %s: %w", attr, err)
		}
	}
	return nil
}

// loadTarball opens a `docker save` tarball (manifest.json), or an OCI
// image layout packed in a tar (oci-layout, index.json), which is
// unpacked into a directory under tmpDir for the time of the load.
func loadTarball(file, tmpDir string) (v1.Image, func(), error) {
	noop := func() {}
	if img, err := tarball.ImageFromPath(file, nil); err == nil {
		return img, noop, nil
	} else if !isOCILayoutTar(file) {
		return nil, noop, fmt.Errorf("neither a docker save tarball nor an OCI layout: %w", err)
	}
	dir, err := os.MkdirTemp(tmpDir, "layout-")
	if err != nil {
		return nil, noop, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	f, err := os.Open(file)
	if err != nil {
		cleanup()
		return nil, noop, err
	}
	defer f.Close()
	if err := extractPlain(f, dir); err != nil {
		cleanup()
		return nil, noop, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		cleanup()
		return nil, noop, err
	}
	img, err := firstImage(idx)
	if err != nil {
		cleanup()
		return nil, noop, err
	}
	return img, cleanup, nil
}

// firstImage returns the image for this machine's platform in an index
// (the first image when none says its platform).
func firstImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := firstImage(child); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage():
			if d.Platform == nil || d.Platform.OS == "" || (d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH) {
				return idx.Image(d.Digest)
			}
		}
	}
	return nil, fmt.Errorf("the OCI layout holds no image for linux/%s", runtime.GOARCH)
}

func isOCILayoutTar(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return false
		}
		if cleanEntry(hdr.Name) == "oci-layout" {
			return true
		}
	}
}

// extractPlain unpacks the regular files and directories of a tar (an
// OCI layout) inside dir.
func extractPlain(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := cleanEntry(hdr.Name)
		if name == "." {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(name), 0o700); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
}
