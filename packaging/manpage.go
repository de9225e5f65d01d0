package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Manpage renders unitvisor(1) in roff from the CLI's own help text (what
// `unitvisor help` prints), so the page never drifts from the binary. The
// help text's shape is read loosely: the "usage:" line becomes the
// synopsis, each "name:" heading a section whose indented "term  text"
// lines become tagged paragraphs, and any other text a paragraph of the
// description. Packaging facts (files, the service) are added here.
func Manpage(help string, date time.Time) []byte {
	var synopsis string
	var desc []string // roff paragraphs
	type item struct{ term, text string }
	type section struct {
		title string
		items []item
		paras []string
	}
	var sections []*section
	var cur *section
	var para []string
	flush := func() {
		if len(para) == 0 {
			return
		}
		p := strings.Join(para, " ")
		if cur != nil {
			cur.paras = append(cur.paras, p)
		} else {
			desc = append(desc, p)
		}
		para = nil
	}
	for _, line := range strings.Split(strings.TrimRight(help, "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "usage:") && synopsis == "":
			synopsis = strings.TrimSpace(strings.TrimPrefix(trimmed, "usage:"))
		case trimmed == "":
			flush()
			cur = nil // a blank line ends an indented list
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(trimmed, ":") && !strings.Contains(trimmed, " "):
			flush()
			cur = &section{title: strings.TrimSuffix(trimmed, ":")}
			sections = append(sections, cur)
		case cur != nil && strings.HasPrefix(line, " "):
			if term, text, ok := splitColumns(trimmed); ok {
				flush()
				cur.items = append(cur.items, item{term, text})
			} else if n := len(cur.items); n > 0 && len(para) == 0 {
				cur.items[n-1].text += " " + trimmed // continuation line
			} else {
				para = append(para, trimmed)
			}
		default:
			para = append(para, trimmed)
		}
	}
	flush()

	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w(`.\" Generated from "unitvisor help" by unitvisor's packaging; do not edit.`)
	// The version is left out of the footer: a git-derived one is too long
	// for it. `unitvisor version` prints it.
	w(`.TH UNITVISOR 1 "%s" "unitvisor" "User Commands"`, date.UTC().Format("2006-01-02"))
	w(".SH NAME")
	w(`unitvisor \- run jobs as transient systemd units`)
	w(".SH SYNOPSIS")
	if synopsis == "" {
		synopsis = "unitvisor <command> [flags]"
	}
	w(".B unitvisor")
	w("%s", term(strings.TrimSpace(strings.TrimPrefix(synopsis, "unitvisor"))))
	w(".SH DESCRIPTION")
	w(`\fBunitvisor\fR runs each task of a job as a transient systemd unit named`)
	w(`\fIprefix\fB\-\fIjob\fB\-\fItask\fB@\fIindex\fB.service\fR in \fBunitvisor.slice\fR.`)
	w(`systemd starts, isolates, restarts and logs the processes; the agent keeps`)
	w(`the desired state and adopts running units when it restarts, so tasks never`)
	w(`restart because the agent did.`)
	for _, p := range desc {
		w(".PP")
		w("%s", roff(p))
	}
	for _, s := range sections {
		w(".SH %s", roff(strings.ToUpper(s.title)))
		for _, it := range s.items {
			w(".TP")
			w("%s", term(it.term))
			w("%s", roff(it.text))
		}
		for _, p := range s.paras {
			w(".PP")
			w("%s", roff(p))
		}
	}
	w(".SH FILES")
	for _, f := range [][2]string{
		{"/etc/unitvisor/agent.hcl", "The agent's configuration, read by unitvisor.service."},
		{"/var/lib/unitvisor", "The agent's store (state.db) and the task directories."},
		{"/run/unitvisor/unitvisor.sock", "The agent's API socket, used by the client commands."},
		{"/usr/lib/systemd/system/unitvisor.service", "The agent's unit; change it with a drop-in (systemctl edit unitvisor)."},
		{"/etc/systemd/system/uv-.service.d/", "Drop-ins here apply to every task unit; uv-JOB-.service.d/ to the tasks of one job."},
	} {
		w(".TP")
		w(`\fI%s\fR`, roff(f[0]))
		w("%s", roff(f[1]))
	}
	w(".SH NOTES")
	w(`Stopping or restarting unitvisor.service never stops a task. Purging the`)
	w(`Debian package stops every unit named uv\-*@*.service and deletes`)
	w(`/var/lib/unitvisor, with the VM images in its images/ directory; units of`)
	w(`another unit_prefix are left alone.`)
	w(".SH SEE ALSO")
	w(`.BR systemctl (1),`)
	w(`.BR journalctl (1),`)
	w(`.BR systemd.unit (5),`)
	w(`.BR systemd.exec (5)`)
	return b.Bytes()
}

var columns = regexp.MustCompile(`^(\S.*?)\s{2,}(\S.*)$`)

// splitColumns splits "job run [-detach] FILE     submit a job" at the
// first run of two or more spaces.
func splitColumns(s string) (term, text string, ok bool) {
	m := columns.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// term renders a command line: command words and flags bold; upper-case,
// <angled> and [bracketed] placeholders italic; brackets roman.
func term(s string) string {
	var out []string
	for _, tok := range strings.Fields(s) {
		core := strings.Trim(tok, "[]<>|")
		pre := tok[:strings.Index(tok, core)]
		post := tok[len(pre)+len(core):]
		switch {
		case core == "":
			out = append(out, roff(tok))
		case placeholder.MatchString(core), strings.HasPrefix(pre, "<"),
			strings.HasPrefix(pre, "[") && !strings.HasPrefix(core, "-"):
			out = append(out, roff(pre)+`\fI`+roff(core)+`\fR`+roff(post))
		default:
			out = append(out, roff(pre)+`\fB`+roff(core)+`\fR`+roff(post))
		}
	}
	return strings.Join(out, " ")
}

// roff escapes text for roff: backslashes, minus signs, and a leading
// control character.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
