package settings

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type spec struct {
	Name    string        `envconfig:"NAME" desc:"a name"`
	On      bool          `envconfig:"ON" desc:"a switch"`
	N       int           `envconfig:"N" desc:"a count" range:"not negative"`
	Big     int64         `envconfig:"BIG" desc:"a big count"`
	Wait    time.Duration `envconfig:"WAIT" desc:"a duration" range:"0 or at least 1s"`
	List    []string      `envconfig:"LIST" desc:"a list"`
	Derived int           `ignored:"true"`
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRead(t *testing.T) {
	s := spec{Name: "default", N: 7}
	err := Read(env(map[string]string{"X_NAME": "n", "X_ON": "true", "X_N": "", "X_BIG": "0x10", "X_WAIT": "1m",
		"X_LIST": "a, b", "X_DERIVED": "9"}), "X", &s)
	want := spec{Name: "n", On: true, N: 7, Big: 16, Wait: time.Minute, List: []string{"a", "b"}}
	if err != nil || !cmp.Equal(s, want) {
		t.Errorf("Read: %v, %s", err, cmp.Diff(want, s))
	}
	err = Read(env(map[string]string{"X_N": "many", "X_WAIT": "soon"}), "X", &s)
	for _, w := range []string{`X_N="many": not a valid int`, `X_WAIT="soon": not a valid time.Duration`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("bad values: %v, want %q", err, w)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		s    spec
		want []string
	}{
		{spec{N: 0, Wait: 0}, nil},
		{spec{N: 3, Wait: time.Second}, nil},
		{spec{N: -1, Wait: time.Millisecond}, []string{"X_N: must not be negative", "X_WAIT: must be 0 or at least 1s"}},
	} {
		var got []string
		for _, err := range Check("X", &tt.s) {
			got = append(got, err.Error())
		}
		if !cmp.Equal(got, tt.want) {
			t.Errorf("Check(%+v): %s", tt.s, cmp.Diff(tt.want, got))
		}
	}
	for r, want := range map[string][]bool{ // for -1, 0, 1, 5, 11
		"positive": {false, false, true, true, true}, "at least 1": {false, false, true, true, true},
		"0 to 10": {false, true, true, true, false}, "0 or at least 5": {false, true, false, true, true},
	} {
		for i, n := range []int{-1, 0, 1, 5, 11} {
			if got := inRange(reflect.ValueOf(n), r); got != want[i] {
				t.Errorf("inRange(%d, %q) = %v", n, r, got)
			}
		}
	}
}

func TestUnknown(t *testing.T) {
	removed := map[string]string{"OLD": "set X_NEW (to %s) instead"}
	err := Unknown([]string{"X_NAEM=a", "X_OLD=5", "PATH=/bin", "X_NAME=a"}, "X", &spec{}, removed)
	for _, w := range []string{"X_NAEM names no setting: did you mean X_NAME?", "X_OLD is gone: set X_NEW (to 5) instead"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Unknown: %v, want %q", err, w)
		}
	}
	if err := Unknown([]string{"X_BOGUS=", "X_TEST_ANY=1", "X_SERVICE_HOST=10.0.0.1", "X_PORT_8080_TCP_ADDR=10.0.0.1"}, "X", &spec{}, removed); err != nil {
		t.Errorf("empty, the tests' and Kubernetes' variables: %v", err)
	}
	if err := Unknown([]string{"X_DERIVED=1"}, "X", &spec{}, nil); err == nil {
		t.Error("a field that is no setting was taken for one")
	}
}

func TestUsage(t *testing.T) {
	var b bytes.Buffer
	if err := Usage(&b, "X", &spec{Wait: time.Second}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "X_WAIT") || !strings.Contains(out, "a duration (0 or at least 1s)") || strings.Contains(out, "DERIVED") {
		t.Errorf("usage:\n%s", out)
	}
	if got := Names("X", &spec{}); len(got) != 6 || got[0] != "X_NAME" {
		t.Errorf("Names = %v", got)
	}
}
