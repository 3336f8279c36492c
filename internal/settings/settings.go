// Package settings reads a service's settings from environment variables into a struct whose
// fields carry envconfig's tags (`envconfig:"NAME" desc:"..."`; a field without one is no
// setting), through a getenv function rather than the process's environment, so that a
// program can run several times in one process, each with its own. An empty variable counts as
// unset. A numeric setting's bounds are a `range` tag in words ("positive", "at least 1"),
// which Check enforces and Usage prints. Usage prints envconfig's table of the variables with
// the struct's values as defaults, and Unknown refuses variables that name no setting, so that
// a misspelt one is not silently ignored.
package settings

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Read sets each setting of spec (a pointer to a struct) whose variable, prefix_NAME, getenv
// gives: strings as they are, bools as strconv.ParseBool, integers as strconv.ParseInt (base
// prefixes allowed), time.Duration as time.ParseDuration, []string comma-separated (each item
// trimmed of white space). Every value that does not parse is an error that names its variable.
func Read(getenv func(string) string, prefix string, spec any) error {
	v := reflect.ValueOf(spec).Elem()
	var errs []error
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag.Get("envconfig")
		name := prefix + "_" + tag
		s, f := getenv(name), v.Field(i)
		if tag == "" || s == "" {
			continue
		}
		if err := set(f, s); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a valid %s", name, s, f.Type()))
		}
	}
	return errors.Join(errs...)
}

func set(f reflect.Value, s string) error {
	switch f.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		f.SetInt(int64(d))
		return err
	case []string:
		items := strings.Split(s, ",")
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		f.Set(reflect.ValueOf(items))
	case string:
		f.SetString(s)
	case bool:
		b, err := strconv.ParseBool(s)
		f.SetBool(b)
		return err
	default: // the integers
		n, err := strconv.ParseInt(s, 0, f.Type().Bits())
		f.SetInt(n)
		return err
	}
	return nil
}

// Check refuses the numeric settings of spec whose value is outside the range their `range`
// tag states: "positive", "not negative", "at least V", "A to B" or "V", or several of them
// joined by " or " (such as "0 or at least 1s"), each V in the setting's own syntax. Each
// error names the variable, and says the range as the tag does.
func Check(prefix string, spec any) []error {
	v := reflect.ValueOf(spec).Elem()
	var errs []error
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag
		if r := tag.Get("range"); r != "" && !inRange(v.Field(i), r) {
			must := "must be " + r
			if rest, ok := strings.CutPrefix(r, "not "); ok {
				must = "must not be " + rest
			}
			errs = append(errs, fmt.Errorf("%s_%s: %s", prefix, tag.Get("envconfig"), must))
		}
	}
	return errs
}

// inRange says whether f (an integer or a duration) is in the range r, which a `range` tag
// states; a malformed tag panics (the program's mistake, which its first test finds).
func inRange(f reflect.Value, r string) bool {
	bound := func(s string) int64 {
		b := reflect.New(f.Type()).Elem()
		if err := set(b, s); err != nil {
			panic(fmt.Sprintf("settings: range %q: %v", r, err))
		}
		return b.Int()
	}
	n := f.Int()
	for _, alt := range strings.Split(r, " or ") {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		from, to, isSpan := strings.Cut(alt, " to ")
		atLeast, isMin := strings.CutPrefix(alt, "at least ")
		switch {
		case alt == "positive":
			lo = 1
		case alt == "not negative":
			lo = 0
		case isMin:
			lo = bound(atLeast)
		case isSpan:
			lo, hi = bound(from), bound(to)
		default:
			lo = bound(alt)
			hi = lo
		}
		if lo <= n && n <= hi {
			return true
		}
	}
	return false
}

// Names are the variables of spec's settings, in the struct's order.
func Names(prefix string, spec any) []string {
	var names []string
	typ := reflect.TypeOf(spec).Elem()
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("envconfig"); tag != "" {
			names = append(names, prefix+"_"+tag)
		}
	}
	return names
}

// usageFormat is envconfig's table with each variable's default as spec has it.
const usageFormat = `This application is configured via the environment. The following environment
variables can be used:

KEY	TYPE	DEFAULT	DESCRIPTION
{{range .}}{{usage_key .}}	{{usage_type .}}	{{$v := printf "%v" .Field.Interface}}{{if ne $v "[]"}}{{$v}}{{end}}	{{usage_description .}}{{with .Tags.Get "range"}} ({{.}}){{end}}
{{end}}`

// Usage prints the table of spec's variables: name, type, default (spec's value) and
// description, with the range of those that have one.
func Usage(w io.Writer, prefix string, spec any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err := envconfig.Usagef(prefix, spec, tw, usageFormat); err != nil {
		return err
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// Unknown refuses the variables of environ (NAME=value) that begin with prefix_ and name
// none of spec's settings: one that removed names (without prefix_) with what replaces it
// (%s in the replacement: the value it was given), any other with the nearest setting's
// name. Left alone: empty ones, prefix_TEST_*, and the variables Kubernetes sets for a Service
// named like the prefix (prefix_SERVICE_HOST, prefix_PORT_8080_TCP and the like).
func Unknown(environ []string, prefix string, spec any, removed map[string]string) error {
	known := Names(prefix, spec)
	var errs []error
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" {
			continue
		}
		if replacement, ok := removed[strings.TrimPrefix(name, prefix+"_")]; ok {
			if strings.Contains(replacement, "%") {
				replacement = fmt.Sprintf(replacement, value)
			}
			errs = append(errs, fmt.Errorf("%s is gone: %s", name, replacement))
			continue
		}
		if !strings.HasPrefix(name, prefix+"_") || slices.Contains(known, name) ||
			strings.HasPrefix(name, prefix+"_TEST_") || serviceLink.MatchString(name) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s names no setting: did you mean %s? (-h lists them all)", name, nearest(name, known)))
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// serviceLink matches the variables Kubernetes injects for a Service (enableServiceLinks).
var serviceLink = regexp.MustCompile(`_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// nearest is the name of names closest to name, by Levenshtein distance.
func nearest(name string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		prev := make([]int, len(n)+1)
		for j := range prev {
			prev[j] = j
		}
		for i := 1; i <= len(name); i++ {
			cur := make([]int, len(n)+1)
			cur[0] = i
			for j := 1; j <= len(n); j++ {
				cost := 1
				if name[i-1] == n[j-1] {
					cost = 0
				}
				cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			}
			prev = cur
		}
		if d := prev[len(n)]; bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
