// Package segments answers which LaunchDarkly Big Segments a context is a member of, in the
// shape of the Big Segment store wrapper of LaunchDarkly's SDKs, as a service shared by many
// callers and environments: hashing, a bounded cache, one read per missed context, one status
// poll loop, and readiness. It is the domain at the centre of bigseg: it knows no Redis, HTTP
// or Prometheus. Stores are behind the Store interface (storage/redis, storage/memory,
// storage/dynamodb), metrics behind Observer, logs go to the slog.Logger passed in, and time
// comes from the clock passed in (Config.Now), so that tests move time instead of waiting. A
// Config's zero fields take the defaults (the Default constants), which are the SDKs' where
// they have one.
//
// # Environments
//
// An Environment is one environment served (one of the Relay Proxy's, one key prefix): its
// name, which routes, tokens' scopes and metrics' labels carry, its prefix and its store; once
// New has made it part of a Service, also its status and its cache. Every other package takes
// this one type, and ValidateName is the one rule of what a name is made of. A Service holds
// every environment served: their poll loop (Run), their readiness, the one channel of their
// changes.
//
// # Hashing
//
// Synchronizers store memberships under the hash of a context key, never the key: standard,
// padded base64 of the SHA-256 of the key's bytes, which is Hash. An Environment looks contexts
// up by hash only (LookupHash, LookupBatch), so a lookup by key and one by hash of the same
// context share one cache entry. Hashes from callers are checked with ValidateHash first: it
// accepts canonical padded base64 (what Hash writes is 44 characters; LaunchDarkly's store
// test suites send shorter ones) up to MaxHashLen, never a hex digest, so that a caller's
// mistake (a hex SHA-256, a URL-safe alphabet, a lost escape) is an error, not "no membership".
//
// # Memberships
//
// A Membership is the set of segment refs a context is included in or excluded from; a ref
// listed as both is included, as in the SDKs. It is immutable and one word wide: identical sets
// share one interned encoding (unique.Handle), so a cache holds each distinct set once. All
// yields refs in ascending byte order, so encoders need not sort.
//
// # An environment's state
//
// Each environment has one sync.RWMutex over its published status, its cache, its inventory and
// how long its last store read took (a hit takes it to read), a singleflight.Group of its
// reads, and a semaphore of its store reads with batches' share of it (buffered channels,
// Config.ReadsInFlight); the Service adds a
// poll lock (a buffered channel of one), the channel of changes (an atomic pointer) and the
// draining flag. Nothing runs between lookups but Run's one goroutine.
//
// # The cache
//
// Answers are cached by hash, "no membership" included: a context with nothing stored is the
// common case. A failed read is never cached, nor a membership that cannot be answered as it
// is (a ref that is not UTF-8 fails its context with ErrInvalidData). An answer is cached for
// an hour while the store has a cursor, since a new cursor drops it anyway, and for the cache
// TTL (Config.CacheTTL, the SDKs' 5 s) while it has none.
//
// The cache is go-cache, which has no size bound of its own. The bound (Config.CacheSize,
// shared evenly by the environments) is kept by a pair of go-caches: new entries go into the
// young one; an entry that would take it past half the bound first makes it the old one,
// dropping the previous old one whole; a hit in the old one is copied into the young one.
// Config.NoCache turns the cache off. Every operation is O(1), the cache never holds more than
// its bound, and a context looked up at least once per half-bound of new entries stays cached
// until its TTL, however many one-off contexts pass through. go-cache's own expiry reads
// time.Now, which tests cannot move, so it is off and entries carry their expiry on the
// injected clock. The environment's lock guards which go-caches are the pair; each go-cache's
// own lock guards its entries, so a hit reads them after letting the environment's lock go.
//
// Invalidation is by generation. The Relay Proxy applies every change in one transaction that
// also sets the store's cursor. When a poll finds a new cursor, the environment replaces its
// pair with an empty one of the next generation, under the lock that publishes the status. A
// lookup remembers the generation it began in; its answer is cached only while that generation
// is current, and it shares a read only with lookups of the same context begun in the same
// generation: a lookup begun after a poll has seen a change never gets a read begun before it.
// So a change is answered at most one poll interval plus one read after it is committed, and a
// change in one environment drops only that one's cache.
//
// # Reads
//
// Concurrent misses of one context in one generation share one read: singleflight, keyed by
// generation and hash. The read runs in the context of the lookup that began it, bounded by
// the lookup timeout (Config.LookupTimeout), and first takes a slot of the environment's
// semaphore, waiting for it in that context: a caller that has gone takes no slot, and misses
// whose callers hang up cost the store nothing. A read is not begun with less time left than
// the last successful read of one context took (a batch's read is no measure of it), so that
// under misses faster than the store answers, slots go to reads that can finish rather than to
// reads abandoned midway. If that first caller goes before its read is
// done, the read is abandoned, and each caller still waiting reads again itself (the first of
// them for the others) rather than failing. The read runs on the first caller's goroutine
// (singleflight's Do: a goroutine of its own would grow its stack inside the store client at
// every miss, 44,000 instructions a cold lookup), so a waiter whose own caller has gone waits
// on for that read, at most the lookup timeout; past the lookup timeout every caller answers
// StoreError, never a late success.
//
// LookupBatch reads all of a batch's misses in one store call (a context asked for twice is
// read once), after taking a slot of the semaphore like a single read. Batches take at most
// half the slots (at least one), so that single lookups always have some, however many
// batches wait. Misses of different callers' single lookups are not batched together: that
// paid for cold-only traffic only, and nothing on Zipf traffic.
//
// A read that fails fails only the contexts it could not read: each answers StoreError with
// its error, uncached. A store that panics, in Memberships or in Metadata, or answers for
// another number of contexts than asked, fails that read with an error, and the process goes
// on. Failed reads are not logged: the Observer counts them (a line each would flood the log
// in an outage), and Explain reads one context straight from the store, beside what the cache
// holds, to say why it fails.
//
// # Status
//
// One poll loop owns every environment's status: Run polls at once, then every poll interval
// (Config.PollInterval, the SDKs' 5 s, capped at the staleness threshold), reading every
// environment's metadata in one call (Config.ReadMetadata: one pipeline on Redis; by default
// each store's in turn), and publishes each environment's StoreStatus, following the SDKs' rules:
//
//   - Available: the poll read the metadata.
//   - Stale: the data was never synchronized, or last synchronized the staleness threshold
//     (Config.StaleAfter, the SDKs' 2 minutes) or more before the poll. A synchronization time in
//     the future (clock skew) is not stale. A failed poll keeps the last synchronization time
//     and cursor known, so the data ages while the store is unavailable.
//
// While a store is unavailable, Run polls it every second (or sooner), so that the status
// recovers within a second of the store. Lookups that miss the cache still read it, as the SDKs'
// do, so that one slow poll costs no membership the store can give; but once the last read has
// failed too (for the store's sake: not for one context's data, nor because its caller left),
// the store is down, and misses fail at once with ErrStoreUnreachable, without a read, until a
// poll answers: a store that hangs is not dialled again by every miss.
//
// A lookup's status is StoreError if its read failed or the store is unavailable, else Stale
// if the data is stale, else Healthy: the values and precedence of the SDKs' BigSegmentsStatus.
//
// Polls run one at a time, under the poll lock, so that a slow poll never overwrites a later
// one; Poll (the embedded store's reload) takes it, so it polls after any poll running. A
// lookup that arrives before the first poll has finished takes it too, within its timeout,
// and polls unless a poll finished meanwhile, so the first answers carry a true status. A poll
// whose caller has gone (Run ending, a first lookup's caller hanging up) records nothing.
//
// Changes delivers changes only: of an environment's Available, Stale, or data (a new
// cursor). It is one channel for every environment and subscriber, which a poll that changes
// something closes and replaces: a subscriber takes it before reading the statuses it follows,
// waits for it to close, and takes the new one, so a slow subscriber never blocks the loop and
// ends up with the latest. A change of Available or Stale is logged once, not at every poll.
//
// # Readiness
//
// Readiness says whether an instance should get traffic: not once Drain was called, and not
// while an environment's first poll has not finished, its store is unavailable, or, with
// Config.ReadyRequiresFresh, its data is stale, naming each such environment.
//
// # The Store contract
//
// A Store sees context hashes only, never keys, like the store interface of the SDKs:
//
//   - Memberships(ctx, hashes) reads the given contexts' memberships, in one round trip where
//     the store allows it, and returns exactly one Read per hash, in order. A context with
//     nothing stored has the zero Membership; one that could not be read has an Err. It should
//     return once ctx ends.
//   - Metadata(ctx) reads LastSynchronized (the zero time for never) and Cursor ("" for none).
//     An error that wraps ErrInvalidMetadata means the store answered with values that are
//     not valid metadata (beyond MaxSynchronizedOnMillis or MaxCursorBytes); any other error
//     means the store could not be reached.
//
// A Service calls Memberships from up to Config.ReadsInFlight reads at once and Metadata from
// one poll at a time; a store must also take calls from others at the same time (the
// inventory reads Metadata at a scan's start and end, beside the polls). What else a store can do is asked by the package that uses it, with an interface of
// its own: handlers' Describer (where the store keeps a context's data, as a StoreView) and
// internal/inventory's Scanner (every context it holds).
package segments
