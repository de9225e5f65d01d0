package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/unitvisor/unitvisor/jobspec"
	"github.com/unitvisor/unitvisor/supervisor"
)

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: unitvisor validate FILE")
		return exitInvalid
	}
	job, code := parseFile(fs.Arg(0), stderr)
	if job == nil {
		return code
	}
	fmt.Fprintf(stdout, "%s: job %q is valid (%d tasks)\n", fs.Arg(0), job.Name, len(job.Tasks))
	return exitOK
}

// parseFile parses a job file locally; on failure it prints every problem
// and returns the exit code.
func parseFile(path string, stderr io.Writer) (*jobspec.Job, int) {
	job, err := jobspec.ParseFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitInvalid
	}
	return job, exitOK
}

func jobRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("job run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := socketFlag(fs)
	detach := fs.Bool("detach", false, "return once the agent has accepted the job")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the tasks to run")
	healthy := fs.Duration("min-healthy", 2*time.Second, "how long every instance must keep running to count as up")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: unitvisor job run [-detach] [-timeout D] FILE")
		return exitInvalid
	}
	path := fs.Arg(0)
	if _, code := parseFile(path, stderr); code != exitOK {
		return code
	}
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitInvalid
	}
	c := newClient(*socket)
	var res supervisor.SubmitResult
	if err := c.do("POST", "/v1/jobs", supervisor.SubmitRequest{File: filepath.Base(path), Source: string(src)}, &res); err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitCode(err)
	}
	fmt.Fprintf(stdout, "job %q version %d submitted\n", res.Job, res.Version)
	tasks := make([]string, 0, len(res.Tasks))
	for t := range res.Tasks {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		fmt.Fprintf(stdout, "  task %s: %s\n", t, res.Tasks[t])
	}
	if *detach {
		return exitOK
	}
	return follow(c, res.Job, *timeout, *healthy, stdout, stderr)
}

// follow prints each instance's status as it changes until every instance
// has settled; it fails when one did not come up.
// An instance counts as up once it has kept running, without a restart, for
// minHealthy: a task that crashes right after exec is not reported as up.
func follow(c *client, job string, timeout, minHealthy time.Duration, stdout, stderr io.Writer) int {
	deadline := time.After(timeout)
	seen := map[string]string{}
	upSince := map[string]time.Time{}
	invocation := map[string]string{}
	time.Sleep(100 * time.Millisecond)
	for {
		var st supervisor.JobStatus
		if err := c.do("GET", "/v1/jobs/"+job, nil, &st); err != nil {
			fmt.Fprintln(stderr, "unitvisor:", err)
			return exitFailure
		}
		settled, ok := true, true
		for _, in := range st.Instances {
			line := in.Status
			if in.Detail != "" {
				line += " (" + in.Detail + ")"
			}
			if seen[in.Unit] != line {
				seen[in.Unit] = line
				fmt.Fprintf(stdout, "  %s[%d] %s: %s\n", in.Task, in.Index, in.Unit, line)
			}
			inv := ""
			if in.State != nil {
				inv = fmt.Sprint(in.State.InvocationID, in.State.NRestarts, in.State.MainPID)
			}
			if !in.OK() || invocation[in.Unit] != inv {
				delete(upSince, in.Unit)
			} else if upSince[in.Unit].IsZero() {
				upSince[in.Unit] = time.Now()
			}
			invocation[in.Unit] = inv
			stable := in.Status == supervisor.StatusComplete || !upSince[in.Unit].IsZero() && time.Since(upSince[in.Unit]) >= minHealthy
			settled = settled && in.Done() && (!in.OK() || stable)
			ok = ok && in.OK()
		}
		if settled {
			if !ok {
				fmt.Fprintf(stderr, "job %q: not every task instance is running (see `unitvisor logs %s`)\n", job, job)
				return exitFailure
			}
			fmt.Fprintf(stdout, "job %q: all %d instances running\n", job, len(st.Instances))
			return exitOK
		}
		select {
		case <-deadline:
			fmt.Fprintf(stderr, "job %q: instances not settled after %s\n", job, timeout)
			return exitFailure
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func jobStop(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("job stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := socketFlag(fs)
	purge := fs.Bool("purge", false, "also forget the job and remove its task directories")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: unitvisor job stop [-purge] NAME")
		return exitInvalid
	}
	q := ""
	if *purge {
		q = "?purge=true"
	}
	var st supervisor.JobStatus
	if err := newClient(*socket).do("DELETE", "/v1/jobs/"+fs.Arg(0)+q, nil, &st); err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitCode(err)
	}
	fmt.Fprintf(stdout, "job %q stopped\n", fs.Arg(0))
	return exitOK
}

func jobStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("job status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() > 1 {
		fmt.Fprintln(stderr, "usage: unitvisor job status [-json] [NAME]")
		return exitInvalid
	}
	c := newClient(*socket)
	var jobs []supervisor.JobStatus
	if fs.NArg() == 1 {
		var st supervisor.JobStatus
		if err := c.do("GET", "/v1/jobs/"+fs.Arg(0), nil, &st); err != nil {
			fmt.Fprintln(stderr, "unitvisor:", err)
			return exitCode(err)
		}
		jobs = append(jobs, st)
	} else if err := c.do("GET", "/v1/jobs", nil, &jobs); err != nil {
		fmt.Fprintln(stderr, "unitvisor:", err)
		return exitCode(err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(jobs)
		return exitOK
	}
	printStatus(stdout, jobs)
	return exitOK
}

func printStatus(w io.Writer, jobs []supervisor.JobStatus) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no jobs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTASK\tINDEX\tUNIT\tSTATUS\tPID\tRESTARTS\tMEMORY\tCPU\tPORTS\tDETAIL")
	for _, j := range jobs {
		name := j.Name
		if j.Stopped {
			name += " (stopped)"
		}
		for _, in := range j.Instances {
			pid, restarts := "-", "-"
			if in.State != nil {
				if in.State.MainPID > 0 {
					pid = fmt.Sprint(in.State.MainPID)
				}
				restarts = fmt.Sprint(in.State.NRestarts)
			}
			mem, cpu := "-", "-"
			if u := in.Usage; u != nil {
				mem = mebibytes(u.MemoryBytes)
				if u.MemoryLimitBytes > 0 {
					mem += "/" + mebibytes(u.MemoryLimitBytes)
				}
				cpu = (time.Duration(u.CPUNanos) * time.Nanosecond).Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, in.Task, in.Index, in.Unit, in.Status, pid, restarts, mem, cpu, ports(in.Ports), in.Detail)
		}
	}
	tw.Flush()
}

func mebibytes(b uint64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

func ports(p map[string]int) string {
	if len(p) == 0 {
		return "-"
	}
	var s []string
	for k, v := range p {
		s = append(s, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// logs shows task output through journalctl, matching the journal fields
// every task unit carries (LogExtraFields).
func logs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	followFlag := fs.Bool("f", false, "follow")
	n := fs.Int("n", 100, "number of lines")
	if fs.Parse(args) != nil || fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "usage: unitvisor logs [-f] [-n N] JOB [TASK]")
		return exitInvalid
	}
	jargs := []string{"journalctl", "--no-pager", "-o", "short-iso", "-n", fmt.Sprint(*n), "UNITVISOR_JOB=" + fs.Arg(0)}
	if fs.NArg() == 2 {
		jargs = append(jargs, "UNITVISOR_TASK="+fs.Arg(1))
	}
	if *followFlag {
		jargs = append(jargs, "-f")
	}
	path, err := exec.LookPath("journalctl")
	if err != nil {
		fmt.Fprintln(stderr, "unitvisor: journalctl not found:", err)
		return exitFailure
	}
	if stdout == os.Stdout {
		err = syscall.Exec(path, jargs, os.Environ())
		fmt.Fprintln(stderr, "unitvisor: exec journalctl:", err)
		return exitFailure
	}
	cmd := exec.Command(path, jargs[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(stderr, "unitvisor: journalctl:", err)
		return exitFailure
	}
	return exitOK
}
