package inventory

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// redraw is how often, at most, the progress line is written again.
const redraw = 250 * time.Millisecond

// Output is what Report scans and how it prints: the one environment named (every one if
// ""); the store's kind, as /status names it (redis, dynamodb), and DynamoDB's table, printed
// with each environment's prefix so that a wrong prefix shows; JSON or tables.
type Output struct {
	Environment  string
	Store, Table string
	JSON         func(w io.Writer, names []string, invs []segments.Inventory) error // writes what GET /segments answers; nil: tables
}

// pick returns the environment of envs named name, every one if name is "", or an error that
// lists their names.
func pick(envs []*segments.Environment, name string) ([]*segments.Environment, error) {
	if name == "" {
		return envs, nil
	}
	if i := slices.IndexFunc(envs, func(e *segments.Environment) bool { return e.Name == name }); i >= 0 {
		return envs[i : i+1], nil
	}
	return nil, fmt.Errorf("inventory: no environment %q: the environments are %s", name, strings.Join(segments.Names(envs), ", "))
}

// Report runs one scan of each of envs (or of the one o.Environment names), one after the other, at most s.ReadsPerSecond contexts
// a second, and writes every segment's counts to out: a table per environment, or with
// o.JSON what GET /segments answers (one object, or an array of them if there are several).
// Each environment's store and prefix are written first (on stderr with JSON, whose objects
// have the fields of /segments only); while a scan runs, the contexts read and the rate are
// redrawn on stderr if it is a terminal. It is server inventory's: a store not a Scanner, or a
// failed scan, is an error.
func Report(ctx context.Context, envs []*segments.Environment, s Settings, o Output, out, stderr io.Writer) error {
	var progress io.Writer
	if terminal(stderr) {
		progress = stderr
	}
	return report(ctx, envs, s, o, out, stderr, progress, realClock)
}

func report(ctx context.Context, envs []*segments.Environment, s Settings, o Output, out, stderr, progress io.Writer, c clock) error {
	envs, err := pick(envs, o.Environment)
	if err != nil {
		return err
	}
	if o.Table != "" {
		o.Store += " table " + o.Table
	}
	for _, e := range envs {
		if _, ok := e.Store.(Scanner); !ok {
			return fmt.Errorf("environment %s: its store cannot list its contexts", e.Name)
		}
	}
	invs := make([]segments.Inventory, 0, len(envs))
	for _, e := range envs {
		if o.JSON != nil {
			fmt.Fprintf(stderr, "%s: %s\n", e.Name, where(o.Store, e.Prefix))
		}
		m := meter{w: progress, env: e.Name, c: c, start: c.now()}
		inv, err := scan(ctx, e, e.Store.(Scanner), s.ReadsPerSecond, c, m.update, nil)
		m.done(inv.Contexts)
		if err != nil {
			return fmt.Errorf("environment %s: %w", e.Name, err)
		}
		invs = append(invs, inv)
	}
	if o.JSON != nil {
		return o.JSON(out, segments.Names(envs), invs)
	}
	return writeTable(out, o.Store, envs, invs)
}

// where describes an environment's store and prefix.
func where(store, prefix string) string {
	return fmt.Sprintf("store %s, prefix %q", store, prefix)
}

// writeTable writes each environment's store, prefix and totals, then its segments, one a line.
func writeTable(out io.Writer, store string, envs []*segments.Environment, invs []segments.Inventory) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for i, r := range invs {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s (%s): %d contexts in %d segments, scanned %s to %s, cursor %q to %q\n", envs[i].Name, where(store, envs[i].Prefix),
			r.Contexts, len(r.Segments), r.StartedAt.UTC().Format(time.RFC3339), r.FinishedAt.UTC().Format(time.RFC3339), r.CursorStart, r.CursorFinish)
		fmt.Fprintln(tw, "SEGMENT\tINCLUDED\tEXCLUDED")
		for _, s := range r.Segments {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", s.Ref, s.Included, s.Excluded)
		}
	}
	return tw.Flush()
}

// terminal says whether w is a terminal, where a progress line redrawn with \r reads well
// (in a file or a pipe it would be noise).
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// meter redraws one line of progress on w (nil: none) at most every redraw.
type meter struct {
	w           io.Writer
	env         string
	c           clock
	start, last time.Time
}

func (m *meter) update(n int64) {
	if m.w == nil {
		return
	}
	if now := m.c.now(); now.Sub(m.last) >= redraw {
		m.last = now
		fmt.Fprintf(m.w, "\r%s: %d contexts scanned, %.0f/s   ", m.env, n, rate(n, now.Sub(m.start)))
	}
}

// done ends the line with the scan's figures.
func (m *meter) done(n int64) {
	if m.w == nil {
		return
	}
	d := m.c.now().Sub(m.start)
	fmt.Fprintf(m.w, "\r%s: %d contexts scanned in %s, %.0f/s   \n", m.env, n, d.Round(time.Millisecond), rate(n, d))
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
