package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// redraw is how often, at most, the progress line is written again.
const redraw = 250 * time.Millisecond

// Report runs one scan of each of envs, one after the other, at most s.ReadsPerSecond contexts
// a second, and writes every segment's counts to out: a table per environment, or with asJSON
// one JSON object {"environments": [...]}. While a scan runs, the contexts read and the rate are
// redrawn on progress (the command's stderr) if it is a terminal. It is server inventory's: a
// store not a Scanner, or a failed scan, is an error.
func Report(ctx context.Context, envs []*segments.Environment, s Settings, out, progress io.Writer, asJSON bool) error {
	if !terminal(progress) {
		progress = nil
	}
	return report(ctx, envs, s, out, progress, asJSON, realClock)
}

func report(ctx context.Context, envs []*segments.Environment, s Settings, out, progress io.Writer, asJSON bool, c clock) error {
	for _, e := range envs {
		if _, ok := e.Store.(Scanner); !ok {
			return fmt.Errorf("environment %s: its store cannot list its contexts", e.Name)
		}
	}
	records := make([]record, 0, len(envs))
	for _, e := range envs {
		m := meter{w: progress, env: e.Name, c: c, start: c.now()}
		inv, err := scan(ctx, e, e.Store.(Scanner), s.ReadsPerSecond, c, m.update)
		m.done(inv.Contexts)
		if err != nil {
			return fmt.Errorf("environment %s: %w", e.Name, err)
		}
		records = append(records, toRecord(e.Name, inv, 0))
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Environments []record `json:"environments"`
		}{records})
	}
	return writeTable(out, records)
}

// writeTable writes each environment's totals, then its segments, one a line.
func writeTable(out io.Writer, records []record) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for i, r := range records {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s: %d contexts in %d segments, scanned %s to %s, cursor %q to %q\n", r.Environment, r.Contexts,
			len(r.Segments), r.StartedAt.UTC().Format(time.RFC3339), r.FinishedAt.UTC().Format(time.RFC3339), r.CursorStart, r.CursorFinish)
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
