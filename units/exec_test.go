package units

import (
	"reflect"
	"testing"
)

func TestExecEscapesDollar(t *testing.T) {
	p := Exec("ExecStopPost", []string{"/bin/echo", "$HOME", "a$$b", `uv-web\x2dfront`}, true)
	if p.Name != "ExecStopPost" || p.Value.Signature().String() != "a(sasb)" {
		t.Fatalf("property %s of type %s, want ExecStopPost a(sasb)", p.Name, p.Value.Signature())
	}
	got := p.Value.Value().([]execCommand)
	want := []execCommand{{Path: "/bin/echo", Args: []string{"/bin/echo", "$$HOME", "a$$$$b", `uv-web\x2dfront`}, IgnoreFailure: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := ExitStatus("SuccessExitStatus", []int32{143}, nil).Value.Signature().String(); s != "(aiai)" {
		t.Fatalf("SuccessExitStatus type %s", s)
	}
}
