package segments

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// MetadataRead is one store's metadata as a batch read it (see Group).
type MetadataRead struct {
	Metadata Metadata
	Err      error
}

// Group polls the status of several services, one an environment, each over a store of its
// own in one database (the Relay Proxy's environments, one key prefix each), with one read of
// every store's metadata a tick, in one round trip where the database allows it, instead of one
// a store. Each service keeps its own status, cursor and cache: a change in one environment
// drops only that environment's cached answers.
type Group struct {
	names    []string
	services []*Service
	read     func(ctx context.Context) []MetadataRead
	interval time.Duration
}

// NewGroup returns the group of services, named by names (their environments), whose
// metadata read returns in one call, in the same order; a nil read polls each service's own
// store (as for one). The group polls at the shortest of the services' intervals.
func NewGroup(names []string, services []*Service, read func(ctx context.Context) []MetadataRead) *Group {
	g := &Group{names: names, services: services, read: read, interval: DefaultPollInterval}
	for i, s := range services {
		if i == 0 || s.pollInterval < g.interval {
			g.interval = s.pollInterval
		}
	}
	return g
}

// Poll polls every service now, in one read, and says whether any store is unreachable.
func (g *Group) Poll(ctx context.Context) (unreachable bool) {
	if g.read == nil {
		for _, s := range g.services {
			unreachable = s.Poll(ctx).Unreachable || unreachable
		}
		return unreachable
	}
	ctx, cancel := g.services[0].withTimeout(ctx)
	defer cancel()
	for i, s := range g.services {
		if !s.lockPoll(ctx) {
			for _, held := range g.services[:i] {
				held.unlockPoll()
			}
			return true
		}
	}
	start := time.Now()
	reads := g.read(ctx)
	d := time.Since(start)
	for i, s := range g.services {
		r := MetadataRead{Err: fmt.Errorf("read metadata: no answer for the store")}
		if i < len(reads) {
			r = reads[i]
		}
		unreachable = s.record(r.Metadata, r.Err, d).Unreachable || unreachable
		s.unlockPoll()
	}
	return unreachable
}

// Run polls every service at once and then every poll interval (more often while a store is
// unreachable), and keeps the services' store readers ready, until ctx ends; see Service.Run.
func (g *Group) Run(ctx context.Context) error {
	for _, s := range g.services {
		defer s.reads.keepReaders()()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			next := g.interval
			if g.Poll(ctx) {
				next = min(next, recoveryPollInterval)
			}
			timer.Reset(next)
		}
	}
}

// Readiness is ready when every service is; else why not, naming the environments that are
// not (with one service, its own reason).
func (g *Group) Readiness() (ready bool, reason string) {
	var not []string
	for i, s := range g.services {
		if ok, why := s.Readiness(); !ok {
			if len(g.services) == 1 {
				return false, why
			}
			not = append(not, g.names[i]+": "+why)
		}
	}
	if len(not) > 0 {
		return false, strings.Join(not, "; ")
	}
	return true, ""
}

// Drain drains every service (see Service.Drain).
func (g *Group) Drain() {
	for _, s := range g.services {
		s.Drain()
	}
}
