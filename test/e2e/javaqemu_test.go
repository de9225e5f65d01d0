//go:build integration

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

const helloJava = `
public class Hello {
  public static void main(String[] args) throws Exception {
    System.out.println("hello args=" + String.join(",", args) + " greeting=" + System.getProperty("greeting")
        + " maxheap=" + (Runtime.getRuntime().maxMemory() >> 20) + "m");
    System.out.flush();
    Thread.sleep(600000);
  }
}
`

// buildJar compiles Hello.java with javac into dir (readable by the task
// user, outside /tmp which tasks do not share) and packs hello.jar.
func buildJar(t *testing.T, dir string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "Hello.java"), []byte(helloJava), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"javac", "-d", dir, filepath.Join(dir, "Hello.java")},
		{"jar", "cfe", filepath.Join(dir, "hello.jar"), "Hello", "-C", dir, "Hello.class"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "hello.jar")
}

// sharedDir makes a world-readable directory outside /tmp.
func sharedDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/lib", name+"-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestJavaDriver(t *testing.T) {
	dir := sharedDir(t, "uvjava")
	jar := buildJar(t, dir)
	a := sdtest.StartAgent(t, "")
	if out := a.MustCLI("node", "status"); !regexp.MustCompile(`driver java\s+enabled \{"path":"[^"]+","version":"\d+`).MatchString(out) {
		t.Fatalf("node status does not show the JVM:\n%s", out)
	}
	job := "java" + a.Prefix
	file := sdtest.WriteJob(t, "java.hcl", fmt.Sprintf(`
job %q {
  task "jar" {
    driver = "java"
    config {
      jar_path    = %q
      jvm_options = ["-Dgreeting=hi-${UNITVISOR_TASK}"]
      args        = ["a1", "$HOME"]
    }
    resources {
      memory = 256
    }
    kill_timeout = "5s"
  }
  task "class" {
    driver = "java"
    config {
      class      = "Hello"
      class_path = %q
      args       = ["c1"]
    }
  }
}`, job, jar, dir))
	a.MustCLI("job", "run", file)
	var logs string
	sdtest.Eventually(t, 20*time.Second, "both programs' output in the journal", func() bool {
		logs = journal(t, "UNITVISOR_JOB="+job)
		return strings.Contains(logs, "args=a1,$HOME greeting=hi-jar") && strings.Contains(logs, "args=c1 greeting=null")
	})
	// Heap from memory: three quarters of 256 MiB. (The args hold "$", so
	// the unit starts the JVM through exec-task: read the process's own
	// command line.)
	if cl := cmdline(t, mainPID(t, a.Unit(job, "jar", 0))); !strings.Contains(cl, "java ") || !strings.Contains(cl, "-Xmx192m") {
		t.Fatalf("JVM command line lacks the derived -Xmx: %q", cl)
	}
	if m := regexp.MustCompile(`greeting=hi-jar maxheap=(\d+)m`).FindStringSubmatch(logs); m == nil {
		t.Fatalf("no heap figure:\n%s", logs)
	} else if n, _ := strconv.Atoi(m[1]); n > 192 || n < 150 {
		t.Fatalf("JVM max heap %d MiB, want about 192", n)
	}
	if uid := procUID(t, mainPID(t, a.Unit(job, "jar", 0))); uid != "65534" {
		t.Fatalf("java runs as uid %s, want nobody", uid)
	}
	start := time.Now()
	a.MustCLI("job", "stop", job)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stop took %s, kill_timeout is 5s", took)
	}

	bad := sdtest.WriteJob(t, "nojar.hcl", `
job "nojar" {
  task "j" {
    driver = "java"
    config {
      jar_path = "/nonexistent/app.jar"
    }
  }
}`)
	if out, code := a.CLI("job", "run", bad); code != 2 || !regexp.MustCompile(`nojar\.hcl:\d+:\d+: .*jar /nonexistent/app.jar`).MatchString(out) {
		t.Fatalf("missing jar: exit %d\n%s", code, out)
	}
}

func TestQemuDriver(t *testing.T) {
	images := sharedDir(t, "uvimages")
	image := filepath.Join(images, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", image, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	a := sdtest.StartAgent(t, fmt.Sprintf(`driver "qemu" {
  enabled       = true
  allowed_paths = [%q]
}`, images))
	job := "vm" + a.Prefix
	file := sdtest.WriteJob(t, "vm.hcl", fmt.Sprintf(`
job %q {
  task "vm" {
    driver = "qemu"
    port "ssh" {}
    config {
      image_path        = %q
      accelerator       = "tcg"
      port_map          = { ssh = 22 }
      graceful_shutdown = true
    }
    resources {
      memory = 128
      cores  = 1
    }
    kill_timeout = "3s"
  }
}`, job, image))
	a.MustCLI("job", "run", file)
	u := a.Unit(job, "vm", 0)
	cmdline := sdtest.Show(t, u, "ExecStart")
	for _, want := range []string{"-m 128M", "-smp 1", "accel=tcg", "hostfwd=tcp::", "-:22", "format=qcow2"} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("qemu command line lacks %q: %s", want, cmdline)
		}
	}
	port := a.Instance(job, "vm", 0).Ports["ssh"]
	sdtest.Eventually(t, 10*time.Second, "TCP connect to the forwarded port", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// The guest has no OS and ignores the ACPI powerdown: after kill_timeout
	// systemd kills qemu.
	start := time.Now()
	a.MustCLI("job", "stop", job)
	took := time.Since(start)
	if took < 2*time.Second || took > 10*time.Second { // powerdown waits kill_timeout less a quarter
		t.Fatalf("stop took %s; want about kill_timeout (3s)", took)
	}
	var logs string
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs = journal(t, "_SYSTEMD_UNIT="+u)
		if strings.Contains(logs, `qmp> {"execute":"system_powerdown"}`) && strings.Contains(logs, "did not shut down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no QMP exchange in the journal of %s:\n%s", u, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs, `qmp< {"return": {}}`) {
		t.Fatalf("no QMP answer in the journal:\n%s", logs)
	}

	for name, cfg := range map[string]string{
		"outside": `image_path = "/etc/passwd"`,
		"kvm":     fmt.Sprintf("image_path = %q\n      accelerator = \"kvm\"", image),
	} {
		f := sdtest.WriteJob(t, name+".hcl", fmt.Sprintf(`
job "bad%s" {
  task "vm" {
    driver = "qemu"
    config {
      %s
    }
  }
}`, name, cfg))
		out, code := a.CLI("job", "run", f)
		if name == "kvm" && code == 0 {
			t.Log("KVM is usable here: the kvm job was accepted")
			continue
		}
		if code != 2 || !regexp.MustCompile(name+`\.hcl:\d+:\d+: `).MatchString(out) {
			t.Errorf("%s: exit %d, want 2 with file:line:col\n%s", name, code, out)
		}
	}
}
