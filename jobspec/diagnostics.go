package jobspec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Diagnostic is one problem found in a job file, with the position of the
// offending attribute, block label or expression.
type Diagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`   // 1-based; 0 if unknown
	Column  int    `json:"column"` // 1-based; 0 if unknown
	Summary string `json:"summary"`
	Detail  string `json:"detail,omitempty"` // what is wrong and what to do
}

// String formats d as "file:line:col: summary: detail" on a single line.
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", d.Line, d.Column)
	}
	b.WriteString(": ")
	b.WriteString(oneLine(d.Summary))
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(oneLine(d.Detail))
	}
	return b.String()
}

// Diagnostics is the error returned by Parse and ParseFile: every problem
// found in the file, ordered by position.
type Diagnostics []Diagnostic

// Error returns one line per diagnostic, see Diagnostic.String.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// sortByPosition orders ds by file, line and column, keeping the order of
// diagnostics at the same position.
func (ds Diagnostics) sortByPosition() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
		)
	})
}

// newDiagnostic builds a Diagnostic positioned at the start of rng.
func newDiagnostic(rng hcl.Range, summary, detail string) Diagnostic {
	return Diagnostic{
		File:    rng.Filename,
		Line:    rng.Start.Line,
		Column:  rng.Start.Column,
		Summary: summary,
		Detail:  detail,
	}
}

// fromHCL converts the errors among diags (warnings are dropped). filename
// is used for diagnostics that carry no position.
func fromHCL(filename string, diags hcl.Diagnostics) Diagnostics {
	var out Diagnostics
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		rng := hcl.Range{Filename: filename}
		switch {
		case d.Subject != nil:
			rng = *d.Subject
		case d.Context != nil:
			rng = *d.Context
		}
		summary, detail := d.Summary, d.Detail
		if summary == "Function calls not allowed" {
			summary, detail = "Unsupported expression", functionCallDetail
		}
		out = append(out, newDiagnostic(rng, summary, detail))
	}
	return out
}

// oneLine joins the lines of s with spaces so that each diagnostic is one
// line.
func oneLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, " ")
}
