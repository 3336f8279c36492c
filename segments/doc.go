// Package segments answers which LaunchDarkly Big Segments a context is a member of, the way
// the Big Segment store wrapper of LaunchDarkly's SDKs does, as a service shared by many
// callers and environments: hashing, a bounded cache of memberships, shared store reads for
// cache misses, one status poll loop, and readiness. It is the domain at the centre of bigseg:
// it knows no Redis, HTTP or Prometheus. Stores are behind the Store interface
// (storage/redis, storage/memory, storage/dynamodb), metrics behind Observer, logs go to the
// slog.Logger passed in, and time comes from the clock passed in (WithClock), so tests move
// time instead of waiting for it.
//
// # Environments
//
// An Environment is one environment served (one of the Relay Proxy's, one key prefix): its
// name, which routes, tokens' scopes and metrics' labels carry, its prefix, its store, and, once
// New has made it part of a Service, its status (with its cursor) and its cache (with its data
// generation). Every other package takes this one type: the handlers and the Redis-protocol
// listener look contexts up in it, the configuration lists environments as Environments (name
// and prefix), and ValidateName is the one rule of what a name is made of. A Service holds
// every environment served and answers for all of them: their poll loop, their readiness, the
// one channel of their changes.
//
// # Hashing
//
// Synchronizers (the Relay Proxy, bigseg's load command) store memberships under the hash of a
// context key, never the key: standard, padded base64 of the SHA-256 of the key's bytes, which
// is Hash. An Environment therefore looks contexts up by hash only (LookupHash, LookupBatch); a
// lookup by key is a lookup of Hash(key), so a lookup by key and one by hash of the same
// context share one cache entry. Hashes from callers are checked with ValidateHash first: it
// accepts only what Hash writes, the 44 characters of 32 bytes in the one canonical form an
// encoder writes (unused bits zero), so that a caller's mistake (a hex digest, a URL-safe
// alphabet, a lost escape) is an error, not "no membership". SHA-256 is the only scheme
// LaunchDarkly's synchronizers and SDKs use, so no other is accepted.
//
// # Memberships
//
// A Membership is the set of segment refs a context is included in or excluded from; a ref
// listed as both is included, as in the SDKs. It is immutable and one word wide: identical sets
// share one interned encoding (unique.Handle), so a cache of many contexts holds each distinct
// set once (real data repeats a few sets endlessly), and costs little more than its keys. All
// yields refs in ascending byte order, so encoders get a stable order without sorting.
//
// # The cache
//
// Answers are cached by hash, "no membership" (the zero Membership) included: a context with
// nothing stored is the common case and must not cost a read every time. A failed read is never
// cached, nor a membership that cannot be answered as it is (a ref that is not UTF-8 fails its
// context with ErrInvalidData).
//
// The cache is go-cache, as the design chose, but not as go-cache alone is meant, for two
// reasons. go-cache has no size bound, so each environment's cache keeps one by rotating a pair
// of them: new entries go into the young one; an entry that would take it past half the bound
// first makes it the old one, dropping the previous old one whole; a hit in the old one is
// copied into the young one. So the cache never holds more than its bound (WithCache,
// DefaultCacheSize, shared evenly by the environments, at least two entries each; an entry
// copied into the young go-cache counts in both and the total still fits), every operation is O(1), with no scan and no purge,
// and a context looked up at least once per half-bound of new entries stays cached until its
// TTL, however many one-off contexts pass through. And go-cache's own expiration reads
// time.Now, which tests cannot move, so entries carry their expiry on the injected clock and
// go-cache's is off: an expired entry keeps its place until its go-cache is dropped or a new
// read of its context replaces it. Insertions, rotations and invalidations hold the cache's one
// lock, so the bound holds under any number of concurrent writers; a hit reads the current pair
// through an atomic pointer and takes no lock of the cache's own.
//
// An answer is cached for the cursor TTL (WithCursorTTL, DefaultCursorTTL: an hour) while the
// store has a cursor, since a new cursor drops it anyway, and for the cache TTL (WithCache,
// DefaultCacheTTL: the SDKs' 5 s) while it has none.
//
// Invalidation is by data generation, which belongs to the pair. The Relay Proxy applies every
// change in one transaction that also sets the store's cursor to the change's version. When a
// poll finds a new cursor, the environment's cache replaces its pair with an empty one of the
// next generation: O(1), whatever it held. A read remembers the generation it started in, and
// its answer is stored only while that generation is the pair's, so a read that started before
// a change and finished after it is answered to whoever waited for it but never cached as
// current. A new synchronization time alone (synchronizers also set it while idle) drops
// nothing. So a change is answered at most one poll interval plus one read after the
// synchronizer commits it, and a change in one environment drops only that one's cache.
//
// # Reads of cache misses
//
// Concurrent misses of one context share one read: golang.org/x/sync/singleflight, keyed by
// hash. Misses of different contexts share store calls too, by batching, which pays where
// misses come together: without it (bench/ab/singleflight.patch, BENCHMARKS.md) a cold lookup
// costs 1.28x the CPU and 2.1x the round trips, for Zipf traffic it makes no difference.
// While Run runs it keeps, for each environment, WithReadsInFlight (DefaultReadsInFlight)
// reader goroutines. A miss is handed to them on a channel (unbuffered, so that a miss is queued only while a
// reader is busy); a reader takes one and, without waiting, every other miss waiting to be
// handed over (up to 256), and reads them in one Store.Memberships call: one Redis pipeline
// instead of one round trip each. Under light load every miss finds a free reader and is read
// at once, alone: batching adds no waiting. The readers are kept (not started per miss) so that
// the stack they grow through go-redis's call chain is grown once. Before Run and after it
// returns (it waits for its readers), a miss is read by its own lookup.
//
// A shared read runs detached from its callers, on a context of its own bounded by the lookup
// timeout (WithLookupTimeout, DefaultLookupTimeout), so that one caller giving up fails no one
// else. A caller waits until the read is done, its own context ends or the lookup timeout
// passes, whichever is first; past the timeout it answers StoreError, never a late success.
//
// LookupBatch reads all of a batch's misses in one store call of its own (a context asked for
// twice is read once). Every store read, a batch's or a reader's, first takes one of the
// environment's read slots (a buffered channel as a semaphore, as many as the reads in
// flight), so its store never has more Memberships calls running at once however lookups
// arrive.
//
// A read that fails fails only the contexts it could not read: each answers StoreError with its
// error, uncached. A store that panics, or answers for another number of contexts than asked,
// fails that whole read with an error; the process goes on. Failed reads are logged by hash
// (keys are personal data) at most once per 10 s, with how many failed since; a read whose
// caller gave up is not the store's fault and is logged at debug level only.
//
// # Status
//
// One poll loop owns every environment's status: Run polls at once, then every poll interval
// (WithPollInterval, DefaultPollInterval: the SDKs' 5 s, capped at the staleness threshold so
// that staleness is never seen later than it happens), reading every environment's metadata in
// one call (WithMetadataRead: one pipeline on Redis, whatever the number of environments; by
// default each store's in turn), and publishes each environment's StoreStatus through an atomic
// pointer, which lookups, Status and Readiness load and never lock. Each status follows the
// SDKs' rules:
//
//   - Available: the poll read the metadata.
//   - Stale: the data was never synchronized (a zero time), or last synchronized the
//     staleness threshold (WithStaleAfter, DefaultStaleAfter: the SDKs' 2 minutes) or more
//     before the poll. A synchronization time in the future (clock skew) is not stale. A failed
//     poll keeps the last synchronization time and cursor known, so the data ages while the
//     store is unavailable.
//   - Unreachable: the poll could not reach the store at all, as opposed to reading metadata
//     that is not valid (ErrInvalidMetadata), which makes the store unavailable but still
//     readable.
//
// A lookup's status is StoreError if its read failed or the store is unavailable, else Stale
// if the data is stale, else Healthy: the values and precedence of the SDKs' BigSegmentsStatus.
// While a store is unreachable, lookups that miss its cache fail at once with
// ErrStoreUnreachable instead of each paying for a connection attempt (hits are still answered,
// as StoreError), and Run polls every second (or every poll interval, if shorter), so that
// recovery is seen soon; the poller, not every lookup, finds out when the store is back.
//
// Polls run one at a time, through singleflight alone (one key): whoever asks for a poll while
// one runs shares it, so each status follows the one before and a slow poll never overwrites a
// later one. A lookup that arrives before the first poll has finished shares that poll, or
// polls inline, within its timeout, so the first answers already carry a true status. Poll (the
// embedded store's reload) waits out a poll already running, whose read may predate the
// caller's change, and then polls.
//
// Changes delivers changes only: of an environment's Available, of its Stale, and of its
// data (a new cursor); a poll that changes none of them signals nothing. It is one channel for
// every environment and every subscriber, which a poll that changes something closes and
// replaces: a subscriber takes it before reading the statuses it follows, waits for it to
// close, and takes the new one. A close stands for every change since the subscriber last
// looked, so a slow subscriber never blocks the loop, needs no unsubscribing, and always ends
// up with the latest. A change of Available or Stale is logged once, not at every poll; the
// Observer hears of every poll (with whether it changed anything) and of every data change.
//
// # Readiness
//
// Readiness, the one rule of it, says whether an instance should get traffic: not once Drain
// was called (shutdown has begun; lookups are still answered), and not while an environment's
// first poll has not finished, its store is unavailable, or, with WithReadyRequiresFresh, its
// data is stale, naming each such environment when there are several. Stale answers are better
// than none, so by default staleness alone keeps an instance ready.
//
// # What an environment holds
//
// For one environment, the concurrency devices are: one sync.Mutex in its cache (writes) and
// one in its read-failure log; atomics: its status pointer and its cache's pair pointer; the
// channel of misses to its readers and the buffered channel of its read slots; a singleflight
// group of its misses (DoChan: a goroutine and a done channel a hash being read, for the read's
// length); and, while Run runs, its readers (WithReadsInFlight goroutines). The
// Service adds, for every environment together: the poll loop (Run's goroutine), a
// singleflight group of polls, an atomic poll count, the atomic pointer to the channel that
// says whether readers run, the atomic pointer to the channel of changes, and the draining flag.
//
// # Traces
//
// With WithTracerProvider, a lookup whose caller's span is being recorded (the HTTP request's,
// the Redis-protocol command's) is a span of its own beneath it, "lookup", with its
// environment, its cache hit or miss and its status (a batch: its contexts, hits and worst
// status); a caller not sampled costs nothing more than that check. A store read is a span,
// "read", which the store clients' spans are beneath. A read shared by several lookups (one
// miss coalesced by singleflight, or misses batched by a reader) is one span, beneath the
// first traced lookup it serves and linked to every one, and each of them links to it, so
// that every lookup's trace shows its read: a traced miss registers, before it waits, as
// waiting for a read of its hash; the read takes every lookup waiting for its hashes as it
// starts, and lookups that join it while it runs add their link to it at once. A batch's read
// is beneath the batch. Polls are spans of their own, "poll", roots, never in a lookup's trace.
// No span holds a key or a hash.
//
// # The Store contract
//
// A Store sees context hashes only, never keys, like the store interface of the SDKs:
//
//   - Memberships(ctx, hashes) reads the memberships of the given contexts, in one round trip
//     where the store allows it, and returns exactly one Read per hash, in the same order. A
//     context with nothing stored has the zero Membership and no error; a context that could
//     not be read has an Err, and its Membership is not used. It should return once ctx ends.
//   - Metadata(ctx) reads what the synchronizer last recorded: LastSynchronized (the zero time
//     for never) and Cursor ("" for none: older synchronizers, data written by hand). An error
//     that wraps ErrInvalidMetadata means the store answered with values that are not valid
//     metadata, such as a synchronization time after MaxSynchronizedOnMillis or a cursor longer
//     than MaxCursorBytes (a store reads no more than these); any other error means the store
//     could not be reached.
//
// Both are called concurrently: Memberships by up to the reads in flight at once, Metadata by
// one poll at a time (or through the read of every environment's metadata, when given).
package segments
