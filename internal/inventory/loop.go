// Package inventory counts, every interval, the contexts that each segment of every
// environment's store includes and excludes: what an operator compares with what LaunchDarkly
// shows, and what alerts watch (a segment that lost half its contexts, a scan that no longer
// completes).
//
// One loop (Loop.Run) scans every environment whose store is a Scanner, one at a time,
// at most Settings.ReadsPerSecond reads a second (a context read, or a key the walk of the
// store steps over: on Redis every key of the database), and publishes each result on its
// Environment (SetInventory) and to an Observer (the metrics). Its memory grows with the
// segments found, never with the contexts. A store that replicas share (a Fleet: Redis,
// DynamoDB) is scanned by the one replica that holds its lease, which renews it while it
// scans, stores the result, and gives the lease back when Run ends; the others load the result
// and serve it. Report runs one scan for the server inventory command.
package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/bigseg/bigseg/segments"
)

// Settings are the operator's: how often and how fast. (How many segments the metrics export is
// metrics.Inventory's; the scan counts all.)
type Settings struct {
	Interval       time.Duration // between two scans of every environment; 0 or less: no scans
	ReadsPerSecond int           // reads a second while a scan runs (pacer); 0 or less: no limit
}

// Observer is told of each environment's inventory as it is published: the last complete
// scan's (State ScanNone before any, as Run tells it at its start), and how many segments lost
// more than half their contexts between it and the scan before. metrics.Inventory is one.
type Observer interface {
	Scanned(environment string, inv segments.Inventory, shrunk int)
}

// Fleet is a store that replicas share and that can elect one of them to scan it, and keep
// that scan's result for the others: so that N replicas read the store once an interval, not N
// times, and all answer the same counts.
type Fleet interface {
	// TakeLease takes or renews the scan lease for owner for ttl, and says whether owner holds
	// it. A store user not allowed to write returns an error that is fs.ErrPermission.
	TakeLease(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	// SaveInventory stores the last scan's result.
	SaveInventory(ctx context.Context, data []byte) error
	// LoadInventory returns the result last stored, nil (and no error) if none.
	LoadInventory(ctx context.Context) ([]byte, error)
	// ReleaseLease gives the scan lease up if owner holds it (and does nothing if not), so
	// that another replica can take it at once.
	ReleaseLease(ctx context.Context, owner string) error
}

// Loop scans every environment's store, in turn, every interval (Run).
type Loop struct {
	targets  []*target
	settings Settings
	log      *slog.Logger
	obs      Observer
	owner    string // this process's name for leases: its host name and a random suffix
	clock    clock
}

// target is one environment the loop scans, and what the loop remembers of it.
type target struct {
	env      *segments.Environment
	sc       Scanner
	fleet    Fleet // nil: this replica scans the store alone
	readOnly bool  // the store refused this replica the lease: it only loads
	held     bool  // this replica took the lease last it asked: Run gives it back when it ends
	shrunk   int   // of the inventory published
	retry    bool  // this round's scan or lease failed for a reason that may pass soon
}

// New returns the loop over envs that have a Scanner store (the others are never scanned).
// obs may be nil.
func New(envs []*segments.Environment, s Settings, log *slog.Logger, obs Observer) *Loop {
	l := &Loop{settings: s, log: log, obs: obs, owner: owner(), clock: realClock}
	for _, e := range envs {
		if sc, ok := e.Store.(Scanner); ok {
			fleet, _ := e.Store.(Fleet)
			l.targets = append(l.targets, &target{env: e, sc: sc, fleet: fleet})
		}
	}
	return l
}

// owner names this process among replicas: its host name (a pod's name) tells an operator who
// holds a lease, and the random part tells two processes of one host apart.
func owner() string {
	host, _ := os.Hostname()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// Run scans (or loads) every environment at once and then every interval, until ctx ends;
// with no interval, or no environment to scan, it returns at once. A round starts an interval
// after the one before started (at once if that one took longer). It returns nil: a failed
// scan is logged and published on its environment, and the next interval tries again. When
// ctx ends it gives back the leases it holds, so that another replica scans at once.
func (l *Loop) Run(ctx context.Context) error {
	if l.settings.Interval <= 0 || len(l.targets) == 0 {
		return nil
	}
	for _, t := range l.targets {
		l.publish(t, t.env.Inventory())
	}
	defer l.release(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		start := time.Now()
		next := l.settings.Interval
		if l.round(ctx) { // a scan failed: a store's hiccup costs a retry, not an interval
			next = min(next, time.Since(start)+retryAfter)
		}
		timer.Reset(next - time.Since(start))
	}
}

// retryAfter is how soon a failed scan is tried again, if sooner than the interval.
const retryAfter = time.Minute

// releaseTimeout bounds the release of the leases at shutdown: a store that does not answer
// delays it no more than that, and the lease then lapses as it would have.
const releaseTimeout = 2 * time.Second

// release gives back the leases this replica holds, each bounded by releaseTimeout after ctx
// ended.
func (l *Loop) release(ctx context.Context) {
	for _, t := range l.targets {
		if t.fleet == nil || !t.held {
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		err := t.fleet.ReleaseLease(rctx, l.owner)
		cancel()
		if err != nil {
			l.log.Warn("give back the inventory scan lease; it lapses by itself", "environment", t.env.Name, "err", err)
			continue
		}
		t.held = false
		l.log.Info("gave back the inventory scan lease", "environment", t.env.Name)
	}
}

// round scans, or loads, each environment once, and says whether a scan or lease failed in a
// way worth trying again soon.
func (l *Loop) round(ctx context.Context) (failed bool) {
	for _, t := range l.targets {
		if ctx.Err() != nil {
			return false
		}
		if t.fleet != nil && !l.lead(ctx, t) {
			l.load(ctx, t)
		} else {
			l.scanOne(ctx, t)
		}
		failed = failed || t.retry
		t.retry = false
	}
	return failed
}

// scanOne counts t's store, publishing State running while it does (with the last complete
// counts), then the new counts, or the last complete ones with the error.
func (l *Loop) scanOne(ctx context.Context, t *target) {
	log := l.log.With("environment", t.env.Name)
	prev := t.env.Inventory()
	running := prev
	running.State = segments.ScanRunning
	t.env.SetInventory(running)
	inv, err := scan(ctx, t.env, t.sc, l.settings.ReadsPerSecond, l.clock, nil, l.keeper(t))
	switch {
	case errors.Is(err, errLeaseLost):
		t.env.SetInventory(prev)
		t.held = false
		log.Warn("inventory scan stopped: another replica holds the scan lease now, and this one serves the counts it stores", "err", err)
		return
	case err != nil:
		t.env.SetInventory(prev)
		if ctx.Err() == nil {
			l.failed(t, err)
			log.Warn("inventory scan failed; the last complete counts stay", "err", err)
		}
		return
	}
	n := 0
	if !prev.FinishedAt.IsZero() {
		n = shrunk(prev.Segments, inv.Segments)
	}
	t.env.SetInventory(inv)
	t.shrunk = n
	l.publish(t, inv)
	log.Info("inventory scan complete", "contexts", inv.Contexts, "segments", len(inv.Segments),
		"shrunk", n, "duration", inv.FinishedAt.Sub(inv.StartedAt).String())
	if t.fleet != nil {
		l.save(ctx, t, inv)
	}
}

// failed records on t's inventory why its last scan failed and when, as /segments shows it;
// the counts and their state stay the last complete scan's. A failure of the store is tried
// again soon; data a scan cannot count waits the interval, to be fixed.
func (l *Loop) failed(t *target, err error) {
	t.retry = !errors.Is(err, segments.ErrInvalidData)
	inv := t.env.Inventory()
	inv.LastError, inv.LastErrorAt = err.Error(), l.clock.now()
	t.env.SetInventory(inv)
}

func (l *Loop) publish(t *target, inv segments.Inventory) {
	if l.obs != nil {
		l.obs.Scanned(t.env.Name, inv, t.shrunk)
	}
}

// lead takes (or renews) t's scan lease, and says whether this replica scans. The lease lasts
// an interval and a half: its holder renews it at the start of each round, and every third of
// an interval while it scans (keeper), so a scan longer than the lease keeps it; when the
// holder stops without giving it back, another replica scans within two and a half intervals
// of its last renewal, inside the alert's three.
func (l *Loop) lead(ctx context.Context, t *target) bool {
	if t.readOnly {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	held, err := t.fleet.TakeLease(ctx, l.owner, l.leaseTTL())
	switch {
	case errors.Is(err, fs.ErrPermission):
		t.readOnly = true
		l.log.Warn("this replica will not scan the store for the inventory: its store user may not write the scan lease; it serves the counts another replica stores",
			"environment", t.env.Name, "err", err)
		return false
	case err != nil:
		if stopping(ctx) {
			return false
		}
		l.log.Warn("take the inventory scan lease", "environment", t.env.Name, "err", err)
		l.failed(t, fmt.Errorf("take the scan lease: %w", err))
		return false
	}
	t.held = held
	return held
}

// leaseTTL is how long a lease lasts unless renewed: an interval and a half.
func (l *Loop) leaseTTL() time.Duration { return l.settings.Interval * 3 / 2 }

// errLeaseLost stops a scan whose lease another replica took (this one renewed it too late).
var errLeaseLost = errors.New("another replica holds the scan lease")

// keeper returns what renews t's lease while a scan of it runs (nil if t has no lease): every
// third of an interval of scan time, called between reads, one TakeLease. It fails with
// errLeaseLost if another replica holds the lease, so that two replicas never scan at once.
func (l *Loop) keeper(t *target) func(context.Context) error {
	if t.fleet == nil {
		return nil
	}
	every := l.settings.Interval / 3
	next := l.clock.now().Add(every)
	return func(ctx context.Context) error {
		now := l.clock.now()
		if now.Before(next) {
			return nil
		}
		next = now.Add(every)
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		held, err := t.fleet.TakeLease(ctx, l.owner, l.leaseTTL())
		if err != nil {
			return fmt.Errorf("renew the scan lease: %w", err)
		}
		if !held {
			return errLeaseLost
		}
		return nil
	}
}

// stopping says whether a call bounded by callTimeout under ctx failed because the loop ends
// (Run's context was canceled), which is no failure to show; one that timed out is.
func stopping(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// save stores inv for the other replicas.
func (l *Loop) save(ctx context.Context, t *target, inv segments.Inventory) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := t.fleet.SaveInventory(ctx, encode(t.env.Name, inv, t.shrunk)); err != nil {
		l.log.Warn("store the inventory for the other replicas", "environment", t.env.Name, "err", err)
	}
}

// load serves the result the lease holder stored, if newer than the one served. A load that
// fails is recorded as a failed scan is: the counts served stay, with the error, until a newer
// result is served; what is stored but is not an inventory as bigseg stores it is invalid
// data, which waits the interval to be replaced.
func (l *Loop) load(ctx context.Context, t *target) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	data, err := t.fleet.LoadInventory(ctx)
	if err == nil && data == nil {
		return
	}
	var inv segments.Inventory
	var n int
	if err == nil {
		if inv, n, err = decode(data); err != nil {
			err = fmt.Errorf("%w: %w", segments.ErrInvalidData, err)
		}
	}
	if err != nil {
		if !stopping(ctx) {
			l.failed(t, fmt.Errorf("load the stored inventory: %w", err))
			l.log.Warn("load the inventory another replica stored", "environment", t.env.Name, "err", err)
		}
		return
	}
	if inv.FinishedAt.Equal(t.env.Inventory().FinishedAt) {
		return
	}
	t.env.SetInventory(inv)
	t.shrunk = n
	l.publish(t, inv)
}
