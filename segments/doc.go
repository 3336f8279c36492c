// Package segments answers which LaunchDarkly Big Segments a context is a member of, the way
// the Big Segment store managers of LaunchDarkly's SDKs do, as a service shared by many callers:
// hashing, a bounded cache of memberships, shared store reads for cache misses, a status poller,
// and readiness. It is the domain at the centre of bigseg: it knows no Redis, HTTP or
// Prometheus. Stores are behind the Store interface (storage/redis, storage/memory), metrics
// behind Observer, logs go to the slog.Logger passed in, and time comes from the clock passed
// in (WithClock), so tests move time instead of waiting for it.
//
// # Hashing
//
// Synchronizers (the Relay Proxy, bigseg's load command) store memberships under the hash of a
// context key, never the key: standard, padded base64 of the SHA-256 of the key's bytes, which
// is Hash. A Service therefore looks contexts up by hash only (LookupHash, LookupBatch); a
// lookup by key is a lookup of Hash(key), so a lookup by key and one by hash of the same
// context share one cache entry. Hashes from callers are checked with
// ValidateHash first: it accepts only the one canonical form an encoder writes, so that a
// caller's mistake (a URL-safe alphabet, a lost escape) is an error, not "no membership".
//
// # Memberships
//
// A Membership is the set of segment refs a context is included in or excluded from; a ref
// listed as both is included, as in the SDKs. It is immutable and one word wide: identical sets
// share one interned encoding, so a cache of many contexts holds each distinct set once (real
// data repeats a few sets endlessly), and costs little more than its keys.
//
// # The cache
//
// Answers are cached by hash, "no membership" (the zero Membership) included: a context with
// nothing stored is the common case and must not cost a read every time. A failed read is never
// cached, nor a membership that cannot be answered as it is (a ref that is not UTF-8 fails its
// context with ErrInvalidData).
//
// go-cache has no size bound, so the cache keeps one by rotating two of them: new entries go
// into the young one; an entry that would take it past half the bound first makes it the old
// one, dropping the previous old one whole; a hit in the old one is copied into the young one.
// So the cache never holds more than its bound (WithCache, DefaultCacheSize; an entry copied
// into the young generation counts in both and the total still fits), every operation is O(1),
// with no scan and no purge, and a context looked up at least once per half-bound of new
// entries stays cached until its TTL, however many one-off contexts pass through. Insertions
// and rotations are made under one lock, so the bound holds under any number of concurrent
// writers; a hit in the young go-cache takes no lock of the cache's own.
//
// An answer is cached for the cursor TTL (WithCursorTTL, DefaultCursorTTL: an hour) while the
// store has a cursor, since a new cursor drops it anyway, and for the cache TTL (WithCache,
// DefaultCacheTTL: the SDKs' 5 s) while it has none. Expiry is decided on the injected clock
// when an entry is read; an expired entry keeps its place until its generation is dropped or a
// new read of its context replaces it.
//
// Invalidation is by data generation. The Relay Proxy applies every change in one transaction
// that also sets the store's cursor to the change's version. When a status poll finds a new
// cursor, the cache starts a new generation and drops both go-caches: O(1), whatever it holds.
// Every entry carries the generation its store read started in, and only entries of the
// current generation are stored or served, so a read that started before a change and finished
// after it is answered to whoever waited for it but never cached as current. A new
// synchronization time alone (synchronizers also set it while idle) drops nothing. So a change
// is answered at most one poll interval plus one read after the synchronizer commits it.
//
// # Reads of cache misses
//
// A single lookup that misses the cache asks the coalescer, which shares store reads two ways:
//
//   - per context, as singleflight does: a miss for a context whose read is pending or in
//     flight joins that read, so N concurrent misses for one context cost one read;
//   - across contexts, by batching: at most WithReadsInFlight (DefaultReadsInFlight) readers
//     run; misses that arrive while all of them are busy queue up, and the next free reader
//     sends the whole queue (up to 256 contexts) as one Store.Memberships call: one Redis
//     pipeline instead of one round trip each.
//
// Under light load every miss finds a free reader and is read at once, alone: coalescing adds
// no waiting, only the batching that concurrency makes possible. While Run runs, idle readers
// park and wait for the next miss instead of ending (starting goroutines and growing their
// stacks through go-redis's call chain cost CPU on every miss); when Run ends it stops them and
// waits for every reader. A lookup after that still gets its read, by a reader that ends once
// the queue is empty.
//
// A shared read runs detached from its callers, on a context of its own bounded by the lookup
// timeout (WithLookupTimeout, DefaultLookupTimeout), so that one caller giving up fails no one
// else. A caller waits until the read is done, its own context ends or the lookup timeout
// passes, whichever is first; past the timeout it answers StoreError, never a late success.
//
// LookupBatch reads all of a batch's misses in one store call of its own (a context asked for
// twice is read once). Every store read, a batch's or a reader's, first takes one of the read
// slots, as many as the reads in flight, so the store never has more Memberships calls running
// at once however lookups arrive.
//
// A read that fails fails only the contexts it could not read: each answers StoreError with its
// error, uncached. A store that panics, or answers for another number of contexts than asked,
// fails that whole read with an error; the process goes on. Failed reads are logged by hash
// (keys are personal data) at most once per 10 s, with how many failed since; a read whose
// caller gave up is not the store's fault and is logged at debug level only.
//
// # Status
//
// Run polls the store's metadata at once, then every poll interval (WithPollInterval,
// DefaultPollInterval: the SDKs' 5 s, capped at the staleness threshold so that staleness is
// never seen later than it happens). Each poll makes a StoreStatus, with the SDKs' rules:
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
// While the store is unreachable, lookups that miss the cache fail at once with
// ErrStoreUnreachable instead of each paying for a connection attempt (hits are still answered,
// as StoreError), and Run polls every second (or every poll interval, if shorter), so that
// recovery is seen soon; the poller, not every lookup, finds out when the store is back.
//
// Polls run one at a time, so that each status follows the one before: a slow poll never
// overwrites the status of a later one. A lookup that arrives before the first poll has
// finished polls inline, within its timeout and shared with every other such lookup, so the
// first answers already carry a true status. Status returns the last status and never reads
// the store.
//
// Subscribe delivers changes only: of Available, of Stale, and of the data (a new cursor); a
// poll that changes none of them sends nothing. Each subscription holds one undelivered status
// and a newer one replaces it, so a slow subscriber never blocks the poller and always ends up
// with the latest. A change of Available or Stale is logged once, not at every poll; the
// Observer hears of every poll (with whether it changed anything) and of every data change.
//
// # Readiness
//
// Readiness says whether an instance should get traffic: not once Drain was called (shutdown
// has begun; lookups are still answered), not before the first poll has finished, not while
// the store is unavailable, and, with WithReadyRequiresFresh, not while the data is stale.
// Stale answers are better than none, so by default staleness alone keeps an instance ready.
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
//     for never) and Cursor ("" for none). An error that wraps ErrInvalidMetadata means the
//     store answered with values that are not valid metadata, such as a synchronization time
//     after MaxSynchronizedOnMillis or a cursor longer than MaxCursorBytes (a store reads no
//     more than these); any other error means the store could not be reached.
//
// Both are called concurrently: Memberships by up to the reads in flight at once, Metadata by
// one poll at a time.
package segments
