"""The Redis calls of the LaunchDarkly Python SDK's Big Segment stores, made here with redis-py.

The SDK (launchdarkly-server-sdk 9.x) cannot be installed here, so these classes make the calls
its two Redis Big Segment stores make, as read in its source, and nothing else:

- ``Redis.new_big_segment_store(url, prefix, redis_opts)``
  (``ldclient/impl/integrations/redis/redis_big_segment_store.py``): one
  ``redis.ConnectionPool.from_url(url=url, **redis_opts)``, and a ``redis.Redis`` over that pool
  for each call;
- ``Redis.async_big_segment_store(url, prefix, redis_opts)``
  (``ldclient/impl/integrations/redis/async_redis_big_segment_store.py``): one
  ``redis.asyncio.from_url(url, **redis_opts)`` client.

Both read ``GET {prefix}:big_segments_synchronized_on`` for the store's metadata, and for a
context ``SMEMBERS {prefix}:big_segment_include:{hash}`` then ``SMEMBERS
{prefix}:big_segment_exclude:{hash}``, one after the other; a ref in both sets counts as
included. Any exception from a call is what makes the SDK report the store unavailable and the
evaluation ``STORE_ERROR`` (``ldclient/impl/big_segments.py``): ``sdk_view`` gives that verdict.
"""

import base64
import hashlib
import time

import redis
import redis.asyncio

DEFAULT_PREFIX = "launchdarkly"  # the SDK's Redis.DEFAULT_PREFIX
STALE_AFTER_MS = 120_000  # the SDK's default BigSegmentsConfig.stale_after, 120 s


def synchronized_on_key(prefix):
    return f"{prefix}:big_segments_synchronized_on"


def include_key(prefix, context_hash):
    return f"{prefix}:big_segment_include:{context_hash}"


def exclude_key(prefix, context_hash):
    return f"{prefix}:big_segment_exclude:{context_hash}"


def hash_of(context_key):
    """A context key's hash, as every SDK computes it: base64 of its SHA-256."""
    return base64.b64encode(hashlib.sha256(context_key.encode("utf-8")).digest()).decode("ascii")


def _membership(included, excluded):
    """The SDK's membership dict from the two sets' members (bytes): None when both are empty."""
    if not included and not excluded:
        return None
    refs = {ref.decode(): False for ref in excluded}
    refs.update({ref.decode(): True for ref in included})
    return refs


class SyncStore:
    """The calls of the SDK's synchronous store (redis.Redis over a pool made from the URL)."""

    def __init__(self, url, prefix=DEFAULT_PREFIX, **redis_opts):
        self.prefix = prefix or DEFAULT_PREFIX
        self._pool = redis.ConnectionPool.from_url(url=url, **redis_opts)

    def _redis(self):
        return redis.Redis(connection_pool=self._pool)

    def last_up_to_date(self):
        """get_metadata: the synchronization time in unix ms, None when there is none."""
        raw = self._redis().get(synchronized_on_key(self.prefix))
        return None if raw is None else int(raw)

    def membership(self, context_hash):
        """get_membership: {ref: included}, or None when the context is in no set."""
        r = self._redis()
        included = r.smembers(include_key(self.prefix, context_hash))
        excluded = r.smembers(exclude_key(self.prefix, context_hash))
        return _membership(included, excluded)

    def close(self):
        self._pool.disconnect()


class AsyncStore:
    """The calls of the SDK's asyncio store (one redis.asyncio client made from the URL)."""

    def __init__(self, url, prefix=DEFAULT_PREFIX, **redis_opts):
        self.prefix = prefix or DEFAULT_PREFIX
        self._client = redis.asyncio.from_url(url, **redis_opts)

    async def last_up_to_date(self):
        raw = await self._client.get(synchronized_on_key(self.prefix))
        return int(raw) if raw else None

    async def membership(self, context_hash):
        included = await self._client.smembers(include_key(self.prefix, context_hash))
        excluded = await self._client.smembers(exclude_key(self.prefix, context_hash))
        return _membership(included, excluded)

    async def close(self):
        # aclose() from redis-py 5.0.1; close() before (Debian bookworm has 4.3.4).
        closer = getattr(self._client, "aclose", None) or self._client.close
        await closer()


def sdk_view(last_up_to_date, membership, now_ms=None):
    """What the SDK makes of a store's two answers, each a value or the exception it raised.

    Returns (membership, bigSegmentsStatus), as ldclient's BigSegmentStoreManager would: an
    exception from either call is STORE_ERROR; no synchronization time, or one older than
    stale_after, is STALE; else HEALTHY.
    """
    if isinstance(membership, Exception) or isinstance(last_up_to_date, Exception):
        return (None if isinstance(membership, Exception) else membership), "STORE_ERROR"
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stale = last_up_to_date is None or now_ms - last_up_to_date >= STALE_AFTER_MS
    return membership, "STALE" if stale else "HEALTHY"
