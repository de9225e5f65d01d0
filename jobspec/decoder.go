package jobspec

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// functionCallDetail explains why function calls are rejected.
const functionCallDetail = "functions cannot be called in a job file; only ${UNITVISOR_*} references are supported; write $${...} for a literal"

// decoder collects the diagnostics of one Parse call, so that decoding can
// go on after a problem and report all of them.
type decoder struct {
	filename string
	diags    Diagnostics
}

// errorf records a diagnostic at the start of rng.
func (d *decoder) errorf(rng hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, newDiagnostic(rng, summary, fmt.Sprintf(format, args...)))
}

// check records err, if not nil, at rng and reports whether err was nil.
func (d *decoder) check(rng hcl.Range, summary string, err error) bool {
	if err != nil {
		d.diags = append(d.diags, newDiagnostic(rng, summary, err.Error()))
	}
	return err == nil
}

// addHCL records the errors among diags.
func (d *decoder) addHCL(diags hcl.Diagnostics) {
	d.diags = append(d.diags, fromHCL(d.filename, diags)...)
}

// content returns the attributes and blocks of body that schema describes
// and reports everything else in body as unknown; where names the body in
// messages, e.g. `task "api"`.
func (d *decoder) content(body hcl.Body, schema *hcl.BodySchema, where string) *hcl.BodyContent {
	return d.contentWith(body, schema, func(item bodyItem) {
		d.reportUnknown(item, schema, where)
	})
}

// contentWith is content with a custom report of unknown items.
func (d *decoder) contentWith(body hcl.Body, schema *hcl.BodySchema, report func(bodyItem)) *hcl.BodyContent {
	items, ok := unknownItems(body, schema)
	if !ok {
		// HCL reports the unknown items, in its own words.
		content, diags := body.Content(schema)
		d.addHCL(diags)
		return content
	}
	for _, item := range items {
		report(item)
	}
	content, _, diags := body.PartialContent(schema)
	d.addHCL(diags)
	return content
}

// bodyItem is an attribute, block or (in JSON, where the two look alike)
// property of a body.
type bodyItem struct {
	kind string // "attribute", "block" or "property"
	name string
	rng  hcl.Range
}

// unknownItems returns the items of body that schema does not describe.
// ok is false if they cannot be listed: for a JSON body that is not a
// single object (HCL also accepts an array of objects) or that has
// duplicate properties.
func unknownItems(body hcl.Body, schema *hcl.BodySchema) (items []bodyItem, ok bool) {
	if native, ok := body.(*hclsyntax.Body); ok {
		for name, a := range native.Attributes {
			if !hasAttribute(schema, name) {
				items = append(items, bodyItem{"attribute", name, a.NameRange})
			}
		}
		for _, b := range native.Blocks {
			if !hasBlock(schema, b.Type) {
				items = append(items, bodyItem{"block", b.Type, b.TypeRange})
			}
		}
		return items, true
	}
	// JSON: every property is an attribute or a block.
	attrs, diags := body.JustAttributes()
	if diags.HasErrors() {
		return nil, false
	}
	for name, a := range attrs {
		if !hasAttribute(schema, name) && !hasBlock(schema, name) {
			items = append(items, bodyItem{"property", name, a.NameRange})
		}
	}
	return items, true
}

// reportUnknown records an item that schema does not describe.
func (d *decoder) reportUnknown(item bodyItem, schema *hcl.BodySchema, where string) {
	switch {
	case item.kind == "attribute" && hasBlock(schema, item.name):
		d.errorf(item.rng, "Block written as attribute",
			"%s is a block, not an attribute; write %s { ... } without \"=\"", item.name, item.name)
	case item.kind == "block" && hasAttribute(schema, item.name):
		d.errorf(item.rng, "Attribute written as block",
			"%s is an attribute, not a block; write %s = <value>", item.name, item.name)
	default:
		names := schemaNames(schema)
		allowed := strings.Join(names, ", ")
		if allowed == "" {
			allowed = "nothing"
		}
		d.errorf(item.rng, "Unknown "+item.kind, "unknown %s %q in %s;%s allowed: %s",
			item.kind, item.name, where, didYouMean(item.name, names), allowed)
	}
}

// schemaNames returns the attribute names, then the block types of schema.
func schemaNames(schema *hcl.BodySchema) []string {
	var names []string
	for _, a := range schema.Attributes {
		names = append(names, a.Name)
	}
	for _, b := range schema.Blocks {
		names = append(names, b.Type)
	}
	return names
}

func hasAttribute(schema *hcl.BodySchema, name string) bool {
	for _, a := range schema.Attributes {
		if a.Name == name {
			return true
		}
	}
	return false
}

func hasBlock(schema *hcl.BodySchema, typ string) bool {
	for _, b := range schema.Blocks {
		if b.Type == typ {
			return true
		}
	}
	return false
}

// eval evaluates expr and records its errors. ok is false after errors or
// for a null or unknown value.
func (d *decoder) eval(expr hcl.Expression, ctx *hcl.EvalContext, what string) (val cty.Value, ok bool) {
	val, diags := expr.Value(ctx)
	d.addHCL(diags)
	switch {
	case diags.HasErrors():
		return cty.NilVal, false
	case val.IsNull():
		d.errorf(expr.Range(), "Invalid value", "%s must not be null; set a value or remove it", what)
		return cty.NilVal, false
	case !val.IsWhollyKnown():
		d.errorf(expr.Range(), "Invalid value", "the value of %s is not known", what)
		return cty.NilVal, false
	}
	return val, true
}

// evalPlain evaluates the value of an attribute that may not contain
// ${...} references.
func (d *decoder) evalPlain(a *hcl.Attribute) (cty.Value, bool) {
	refs := a.Expr.Variables()
	for _, tr := range refs {
		d.errorf(tr.SourceRange(), "Reference not allowed",
			"%s cannot contain ${%s}: references are expanded only in config command and args and in env values; write $${...} for a literal",
			a.Name, tr.RootName())
	}
	if len(refs) > 0 {
		return cty.NilVal, false
	}
	// A non-nil context makes JSON strings templates too, so that "$${"
	// means the same in both syntaxes.
	return d.eval(a.Expr, &hcl.EvalContext{}, a.Name)
}

// evalInterpolated evaluates expr keeping every ${NAME} reference as the
// text "${NAME}", to be expanded per instance later. UNITVISOR_* names must
// be among vars; other names (such as ${PATH}) are kept as they are.
func (d *decoder) evalInterpolated(expr hcl.Expression, vars []string, what string) (cty.Value, bool) {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}}
	ok := true
	for _, tr := range expr.Variables() {
		name := tr.RootName()
		switch {
		case len(tr) > 1:
			d.errorf(tr.SourceRange(), "Unsupported reference",
				"only ${UNITVISOR_*} references are supported; write $${...} for a literal")
			ok = false
		case strings.HasPrefix(name, VarPrefix) && !slices.Contains(vars, name):
			d.errorf(tr.SourceRange(), "Unknown variable", "${%s} is not defined for this task;%s allowed: %s",
				name, didYouMean(name, vars), strings.Join(vars, ", "))
			ok = false
		}
		ctx.Variables[name] = cty.StringVal("${" + name + "}")
	}
	if !ok {
		return cty.NilVal, false
	}
	return d.eval(expr, ctx, what)
}

// interpolatedString evaluates expr as a string that may reference vars.
func (d *decoder) interpolatedString(expr hcl.Expression, what string, vars []string) (string, bool) {
	val, ok := d.evalInterpolated(expr, vars, what)
	if !ok {
		return "", false
	}
	return d.toString(expr, val, what)
}

// stringAttr evaluates a string attribute without references. Numbers and
// bools are converted to strings.
func (d *decoder) stringAttr(a *hcl.Attribute) (string, bool) {
	val, ok := d.evalPlain(a)
	if !ok {
		return "", false
	}
	return d.toString(a.Expr, val, a.Name)
}

// toString converts val, the value of expr, to a string without NUL
// characters.
func (d *decoder) toString(expr hcl.Expression, val cty.Value, what string) (string, bool) {
	if val.IsNull() || !val.IsKnown() {
		d.errorf(expr.Range(), "Invalid value", "%s must be a string, not null", what)
		return "", false
	}
	str, err := convert.Convert(val, cty.String)
	if err != nil {
		d.errorf(expr.Range(), "Invalid type", "%s must be a string, got %s", what, val.Type().FriendlyName())
		return "", false
	}
	s := str.AsString()
	if strings.ContainsRune(s, 0) {
		d.errorf(expr.Range(), "Invalid value", "%s must not contain NUL characters", what)
		return "", false
	}
	return s, true
}

// intAttr evaluates a whole-number attribute between lo and hi.
func (d *decoder) intAttr(a *hcl.Attribute, lo, hi int) (int, bool) {
	val, ok := d.evalPlain(a)
	if !ok {
		return 0, false
	}
	switch val.Type() {
	case cty.Number:
	case cty.String:
		d.errorf(a.Expr.Range(), "Invalid type", "%s must be a number, not a string; write the number without quotes", a.Name)
		return 0, false
	default:
		d.errorf(a.Expr.Range(), "Invalid type", "%s must be a number, got %s", a.Name, val.Type().FriendlyName())
		return 0, false
	}
	f := val.AsBigFloat()
	if !f.IsInt() {
		d.errorf(a.Expr.Range(), "Invalid number", "%s must be a whole number, got %s", a.Name, f.Text('g', 10))
		return 0, false
	}
	n, acc := f.Int64()
	if acc != big.Exact || n < int64(lo) || n > int64(hi) {
		d.errorf(a.Expr.Range(), "Invalid number", "%s must be %s, got %s", a.Name, rangeText(lo, hi), f.Text('g', 10))
		return 0, false
	}
	return int(n), true
}

// rangeText describes the range lo..hi.
func rangeText(lo, hi int) string {
	if hi == maxAttempts {
		return fmt.Sprintf("at least %d", lo)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

// durationAttr evaluates a non-negative duration attribute such as "5s".
func (d *decoder) durationAttr(a *hcl.Attribute) (time.Duration, bool) {
	s, ok := d.stringAttr(a)
	if !ok {
		return 0, false
	}
	dur, err := parseDuration(a.Name, s)
	return dur, d.check(a.Expr.Range(), "Invalid duration", err)
}
