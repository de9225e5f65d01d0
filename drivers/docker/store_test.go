package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/unitvisor/unitvisor/drivers"
)

type entry struct {
	hdr  tar.Header
	data string
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.data)
	}
	tw.Close()
	return buf.Bytes()
}

func file(name, data string) entry {
	return entry{tar.Header{Typeflag: tar.TypeReg, Name: name}, data}
}

func dir(name string, mode int64) entry {
	return entry{tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}, ""}
}

func layerImage(t *testing.T, cmd string, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		data := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = []string{cmd}
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// get waits out the fetch of src and returns the image.
func get(t *testing.T, s *Store, src Source) (Image, error) {
	t.Helper()
	for i := 0; i < 100; i++ {
		img, err := s.Get(context.Background(), src)
		var nr *drivers.NotReadyError
		if !errors.As(err, &nr) {
			return img, err
		}
		if nr.Progress() == "" {
			t.Fatal("no progress while fetching")
		}
		select {
		case <-nr.Ready:
		case <-time.After(30 * time.Second):
			t.Fatal("fetch did not end")
		}
	}
	t.Fatal("still not ready")
	return Image{}, nil
}

// TestStoreLoadUnpackShareGC loads two tarballs of the same image and one
// of another: whiteouts and opaque directories are applied, modes, links
// and owners kept, the same image is unpacked once, and GC removes what
// no job keeps.
func TestStoreLoadUnpackShareGC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the image store keeps file owners: run as root")
	}
	l1 := tarOf(t,
		dir("etc/", 0o755), file("etc/a", "A"), file("etc/gone", "G"),
		dir("opq/", 0o755), file("opq/old", "old"),
		entry{tar.Header{Typeflag: tar.TypeReg, Name: "bin/suid", Mode: 0o4755, Uid: 1000, Gid: 1000}, "S"},
		entry{tar.Header{Typeflag: tar.TypeSymlink, Name: "lnk", Linkname: "etc/a"}, ""},
		entry{tar.Header{Typeflag: tar.TypeLink, Name: "etc/hard", Linkname: "etc/a"}, ""},
		file("../../outside", "stays inside"),
		dir("ro/", 0o555), file("ro/f", "in a read-only dir"),
	)
	l2 := tarOf(t, file("etc/.wh.gone", ""), file("opq/.wh..wh..opq", ""), file("opq/new", "new"), file("etc/a", "A2"))
	img := layerImage(t, "one", l1, l2)
	dirA := t.TempDir()
	tar1, tar2 := filepath.Join(dirA, "one.tar"), filepath.Join(dirA, "copy.tar")
	tag, _ := name.NewTag("test/one:1")
	if err := tarball.WriteToFile(tar1, tag, img); err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(tar2, tag, img); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dirA, "other.tar")
	if err := tarball.WriteToFile(other, tag, layerImage(t, "two", tarOf(t, file("x", "x")))); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(filepath.Join(t.TempDir(), "oci"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	one, err := get(t, s, Source{Load: tar1})
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(one.Rootfs, p))
		return string(b)
	}
	if read("etc/a") != "A2" || read("etc/hard") != "A" && read("etc/hard") != "A2" || read("lnk") != "A2" {
		t.Errorf("files: a=%q hard=%q lnk=%q", read("etc/a"), read("etc/hard"), read("lnk"))
	}
	for _, gone := range []string{"etc/gone", "opq/old", "etc/.wh.gone", "opq/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(one.Rootfs, gone)); err == nil {
			t.Errorf("%s should be gone", gone)
		}
	}
	if read("opq/new") != "new" || read("outside") != "stays inside" || read("ro/f") != "in a read-only dir" {
		t.Errorf("opq/new=%q outside=%q ro/f=%q", read("opq/new"), read("outside"), read("ro/f"))
	}
	if st, err := os.Stat(filepath.Join(one.Rootfs, "bin/suid")); err != nil || st.Mode()&os.ModeSetuid == 0 || st.Mode().Perm() != 0o755 {
		t.Errorf("bin/suid: %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Join(one.Rootfs, "ro")); st.Mode().Perm() != 0o555 {
		t.Errorf("ro/ mode %v", st.Mode())
	}
	if one.Config.Config.Cmd[0] != "one" {
		t.Errorf("config: %+v", one.Config.Config)
	}
	// The same image from another tarball: a second record, one rootfs.
	copy, err := get(t, s, Source{Load: tar2})
	if err != nil {
		t.Fatal(err)
	}
	if copy.Rootfs != one.Rootfs {
		t.Fatalf("same image unpacked twice: %s %s", one.Rootfs, copy.Rootfs)
	}
	two, err := get(t, s, Source{Load: other})
	if err != nil {
		t.Fatal(err)
	}
	if recs, _ := s.Records(); len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	// A second Get is served from the store.
	if again, err := s.Get(context.Background(), Source{Load: tar1}); err != nil || again.Rootfs != one.Rootfs {
		t.Fatalf("stored image: %v", err)
	}
	// GC keeping tar2's image keeps the shared rootfs and its blobs.
	res, err := s.GC(map[string]bool{"load:" + tar2: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 2 || res.Rootfs != 1 {
		t.Fatalf("gc: %+v, want 2 images and 1 rootfs removed", res)
	}
	if _, err := os.Stat(one.Rootfs); err != nil {
		t.Fatal("the kept image's rootfs was removed")
	}
	if _, err := os.Stat(two.Rootfs); err == nil {
		t.Fatal("the other image's rootfs was kept")
	}
	if again, err := get(t, s, Source{Load: tar2}); err != nil || again.Rootfs != one.Rootfs {
		t.Fatalf("kept image after gc: %v", err)
	}
	// A changed tarball is loaded again.
	if err := tarball.WriteToFile(tar2, tag, layerImage(t, "changed", tarOf(t, file("y", "y")))); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(tar2, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if changed, err := get(t, s, Source{Load: tar2}); err != nil || changed.Config.Config.Cmd[0] != "changed" {
		t.Fatalf("changed tarball: %v", err)
	}
	// A broken tarball: the error is reported once, then it is fetched again.
	bad := filepath.Join(dirA, "bad.tar")
	os.WriteFile(bad, []byte("not a tarball"), 0o644)
	if _, err := get(t, s, Source{Load: bad}); err == nil {
		t.Fatal("a broken tarball loaded")
	}
	var nr *drivers.NotReadyError
	if _, err := s.Get(context.Background(), Source{Load: bad}); !errors.As(err, &nr) {
		t.Fatalf("after the error was reported, Get should fetch again: %v", err)
	}
	<-nr.Ready
}

// TestExtractStaysInside: a symlink to / cannot be used to write outside
// the rootfs.
func TestExtractStaysInside(t *testing.T) {
	target := t.TempDir()
	root := t.TempDir()
	data := tarOf(t,
		entry{tar.Header{Typeflag: tar.TypeSymlink, Name: "escape", Linkname: target}, ""},
		file("escape/pwned", "x"),
	)
	err := extractTar(bytes.NewReader(data), root)
	if _, serr := os.Stat(filepath.Join(target, "pwned")); serr == nil {
		t.Fatal("wrote through a symlink out of the rootfs")
	}
	if err == nil {
		t.Fatal("want an error for a path through a symlink out of the rootfs")
	}
}
