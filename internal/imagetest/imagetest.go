// Package imagetest builds small container images and runs a local
// registry for tests of the docker driver: a single-layer image made of
// Debian's static busybox (package busybox-static), and Debian's
// docker-registry (the distribution v2 registry) on 127.0.0.1, optionally
// with htpasswd authentication (the htpasswd tool of apache2-utils).
package imagetest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Busybox is the static busybox the images are made of.
const Busybox = "/usr/bin/busybox"

// Image config of the busybox image.
const (
	User    = "app"       // uid 1000, gid 1000, also in group "extra" (2000)
	WorkDir = "/home/app" // owned by app
	Greet   = "hello from busybox"
)

// BusyboxImage builds a single-layer image: /bin/busybox with a symlink
// per applet, /etc/passwd and /etc/group (root, app 1000, nobody), /tmp,
// /home/app and /data. Its config has Env PATH, IMAGE_VAR=from-image and
// OVERRIDE=image, Cmd ["sh", "-c", "echo hello from busybox; sleep
// 1000"], User app and WorkingDir /home/app.
func BusyboxImage(t testing.TB) v1.Image {
	t.Helper()
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		t.Fatalf("%s: %v (install busybox-static)", Busybox, err)
	}
	out, err := exec.Command(Busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(1700000000, 0)
	dir := func(name string, mode int64, uid int) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime})
		tw.Write(data)
	}
	for _, d := range []string{"bin", "etc", "root", "home", "data", "proc", "sys", "dev"} {
		dir(d, 0o755, 0)
	}
	dir("tmp", 0o1777, 0)
	dir("home/app", 0o755, 1000)
	file("bin/busybox", 0o755, bb)
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" {
			continue
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777, ModTime: mtime})
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	file("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\nextra:x:2000:app\nnogroup:x:65534:\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin", "IMAGE_VAR=from-image", "OVERRIDE=image"}
	cf.Config.Cmd = []string{"sh", "-c", "echo " + Greet + "; sleep 1000"}
	cf.Config.User = User
	cf.Config.WorkingDir = WorkDir
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WriteTarball writes img as a `docker save` tarball tagged tag.
func WriteTarball(t testing.TB, img v1.Image, path, tag string) {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		t.Fatal(err)
	}
}

// Registry is a docker-registry process serving on 127.0.0.1.
type Registry struct {
	Addr               string // host:port
	Username, Password string // set when it requires authentication
}

// StartRegistry starts docker-registry with its own config and storage in
// a temp dir on a free loopback port; with auth it requires user/secret
// (htpasswd, bcrypt). It is stopped when the test ends.
func StartRegistry(t testing.TB, auth bool) *Registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatal("docker-registry is not installed (apt-get install docker-registry)")
	}
	dir := t.TempDir()
	port := FreePort(t)
	r := &Registry{Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "storage"), r.Addr)
	if auth {
		r.Username, r.Password = "user", "secret"
		out, err := exec.Command("htpasswd", "-Bbn", r.Username, r.Password).Output()
		if err != nil {
			t.Fatalf("htpasswd -B (apache2-utils): %v", err)
		}
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, out, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: unitvisor-test\n    path: %s\n", pw)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s did not answer: %v\n%s", r.Addr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// Push writes img to the registry as repo:tag and returns the reference.
func (r *Registry) Push(t testing.TB, img v1.Image, repoTag string) string {
	t.Helper()
	ref := r.Addr + "/" + repoTag
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if r.Username != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: r.Username, Password: r.Password})
	}
	if err := remote.Write(tag, img, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
