"""bigseg's Redis-protocol listener under the calls of the LaunchDarkly Python SDK's Redis Big
Segment stores (ldstore.py: the synchronous one over redis.Redis, the asyncio one over
redis.asyncio), against the real bigseg binary: every answer through bigseg equals the answer
of real Redis holding the same data, read the same way.
"""

import asyncio

import pytest
import redis

import ldstore
from conftest import Layout
from processes import Monitor, wait_for

REF = "beta-testers.g3"
TOKEN = "py-T0ken_one"
OTHER_TOKEN = "py-T0ken_two"

# Each context's sets in the Big Segments data, and the membership the SDK's store makes of them.
CASES = [
    ("included", [REF], [], {REF: True}),
    ("excluded", [], [REF], {REF: False}),
    ("in both", [REF], [REF], {REF: True}),  # included wins
    ("unknown", [], [], None),
    ("in other segments", ["other-segment.g1"], ["another.g2"], {"other-segment.g1": True, "another.g2": False}),
    ("several", [REF, "early-access.g2"], ["blocked.g1"], {REF: True, "early-access.g2": True, "blocked.g1": False}),
]


class Blocking:
    """An ldstore.AsyncStore whose coroutines each run to completion on an event loop of its own."""

    def __init__(self, url, prefix=ldstore.DEFAULT_PREFIX, **redis_opts):
        self._loop = asyncio.new_event_loop()

        async def make():  # made inside its loop, as an asyncio application makes it
            return ldstore.AsyncStore(url, prefix, **redis_opts)

        self._store = self._loop.run_until_complete(make())

    def last_up_to_date(self):
        return self._loop.run_until_complete(self._store.last_up_to_date())

    def membership(self, context_hash):
        return self._loop.run_until_complete(self._store.membership(context_hash))

    def close(self):
        try:
            self._loop.run_until_complete(self._store.close())
        finally:
            self._loop.close()


@pytest.fixture(params=["sync", "async"])
def open_store(request):
    """A function opening the SDK's store calls of one kind (sync, async); closed when the test ends."""
    opened = []

    def open_(url, prefix=ldstore.DEFAULT_PREFIX, **redis_opts):
        store = (ldstore.SyncStore if request.param == "sync" else Blocking)(url, prefix, **redis_opts)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def outcome(call, *args):
    """call's value, or the exception it raised (as the SDK catches it)."""
    try:
        return call(*args)
    except Exception as e:  # what the SDK does with any exception from its store
        return e


def raised(call, *args):
    return isinstance(outcome(call, *args), Exception)


def test_answers_equal_redis(open_store, shared_layout, shared_redis_url, redis_server, bigseg, prefix):
    ref = redis_server()
    ref_layout = Layout(ref.client(), prefix)
    synced = shared_layout.set_synchronized_now()
    for layout in (shared_layout, ref_layout):
        layout.set_synchronized_on(synced)
        for name, included, excluded, _ in CASES:
            layout.set_membership(ldstore.hash_of(name), included, excluded)
    p = bigseg(BIGSEG_REDIS_URL=shared_redis_url, BIGSEG_PREFIX=prefix)
    via_bigseg = open_store(p.url(), prefix)
    via_redis = open_store(ref.url, prefix)

    assert via_redis.last_up_to_date() == synced
    assert via_bigseg.last_up_to_date() == synced
    for name, _, _, want in CASES:
        h = ldstore.hash_of(name)
        assert via_redis.membership(h) == want, name
        got = via_bigseg.membership(h)
        assert got == want, name
        assert ldstore.sdk_view(via_bigseg.last_up_to_date(), got) == (want, "HEALTHY"), name

    # Never synchronized: no synchronized_on at all, which bigseg's poller sees within its interval.
    for layout in (shared_layout, ref_layout):
        layout.delete_synchronized_on()
    wait_for("bigseg to answer GET with nil", lambda: via_bigseg.last_up_to_date() is None)
    assert via_redis.last_up_to_date() is None
    h = ldstore.hash_of("included")
    assert ldstore.sdk_view(via_bigseg.last_up_to_date(), via_bigseg.membership(h)) == ({REF: True}, "STALE")

    # bigseg answered those commands only, none of them with an error.
    counts = p.metrics()
    assert set(counts) <= {("get", "ok"), ("smembers", "ok"), ("client", "ok")}, counts
    assert counts[("smembers", "ok")] == 2 * (len(CASES) + 1)


def test_commands_sent(open_store, redis_server, prefix):
    """MONITOR on real Redis: GET of synchronized_on, then SMEMBERS include and exclude."""
    ref = redis_server()
    layout = Layout(ref.client(), prefix)
    layout.set_synchronized_now()
    h = ldstore.hash_of("included")
    layout.set_membership(h, [REF])
    mon = Monitor(ref.port)
    try:
        store = open_store(ref.url, prefix)
        store.last_up_to_date()
        assert store.membership(h) == {REF: True}
        want = [
            ["GET", ldstore.synchronized_on_key(prefix)],
            ["SMEMBERS", ldstore.include_key(prefix, h)],
            ["SMEMBERS", ldstore.exclude_key(prefix, h)],
        ]
        wait_for("MONITOR to show the SMEMBERS of the exclude set", lambda: any(a == want[-1] for _, a in mon.seen))
        # redis-py 5 and later identify themselves on connecting (CLIENT SETINFO): not a read.
        sent = [a for _, a in mon.seen if a[0].upper() != "CLIENT"]
        assert sent == want
        print(f"sent to Redis: {mon.seen}")
    finally:
        mon.close()


def test_store_error_while_redis_down(open_store, redis_server, bigseg):
    r = redis_server()
    layout = Layout(r.client(), ldstore.DEFAULT_PREFIX)  # both bigseg and the SDK default to it
    layout.set_synchronized_now()
    for key in ("alice-1", "alice-2"):
        layout.set_membership(ldstore.hash_of(key), [REF])
    p = bigseg(BIGSEG_REDIS_URL=r.url + "?dial_timeout=200ms")
    store = open_store(p.url())
    h1, h2, h3 = (ldstore.hash_of(k) for k in ("alice-1", "alice-2", "alice-3"))
    assert ldstore.sdk_view(store.last_up_to_date(), store.membership(h1)) == ({REF: True}, "HEALTHY")

    r.stop()
    wait_for("bigseg to answer GET with an error", lambda: raised(store.last_up_to_date))
    with pytest.raises(redis.exceptions.ResponseError, match="^the Big Segment store is unavailable$"):
        store.last_up_to_date()
    with pytest.raises(redis.exceptions.ResponseError, match="^the Big Segment store could not be read$"):
        store.membership(h2)
    assert ldstore.sdk_view(outcome(store.last_up_to_date), outcome(store.membership, h2)) == (None, "STORE_ERROR")

    r.start()  # empty: it saves nothing; the synchronizer writes again
    synced = layout.set_synchronized_now()
    layout.set_membership(h3, [REF])
    # Not merely no error: bigseg may poll the empty Redis before the write (then GET is nil).
    wait_for("bigseg to answer GET with the new time", lambda: outcome(store.last_up_to_date) == synced)
    assert ldstore.sdk_view(store.last_up_to_date(), store.membership(h3)) == ({REF: True}, "HEALTHY")


ACCEPTED = {
    "URL with password": lambda p: (p.url(password=TOKEN), {}),  # AUTH token
    "URL with user and password": lambda p: (p.url(password=TOKEN, username="default"), {}),  # AUTH default token
    "password in redis_opts": lambda p: (p.url(), {"password": TOKEN}),
}


@pytest.mark.parametrize("form", list(ACCEPTED))
def test_token_as_password(open_store, shared_layout, shared_redis_url, bigseg, prefix, form):
    synced = shared_layout.set_synchronized_now()
    h = ldstore.hash_of("included")
    shared_layout.set_membership(h, [REF])
    p = bigseg(BIGSEG_REDIS_URL=shared_redis_url, BIGSEG_PREFIX=prefix, BIGSEG_API_TOKENS=f"{OTHER_TOKEN},{TOKEN}")
    url, redis_opts = ACCEPTED[form](p)
    store = open_store(url, prefix, **redis_opts)
    assert store.last_up_to_date() == synced
    assert store.membership(h) == {REF: True}


REFUSED = {
    # redis-py 4 raises WRONGPASS as a ResponseError, later ones as an AuthenticationError.
    "wrong token": (f"not-{TOKEN}", "invalid username-password pair"),
    "no token": (None, "Authentication required"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_wrong_token_fails(open_store, shared_layout, shared_redis_url, bigseg, prefix, case):
    shared_layout.set_synchronized_now()
    h = ldstore.hash_of("included")
    shared_layout.set_membership(h, [REF])
    p = bigseg(BIGSEG_REDIS_URL=shared_redis_url, BIGSEG_PREFIX=prefix, BIGSEG_API_TOKENS=TOKEN)
    password, message = REFUSED[case]
    store = open_store(p.url(password=password), prefix)
    errors = (redis.exceptions.ResponseError, redis.exceptions.AuthenticationError)
    with pytest.raises(errors, match=message):
        store.last_up_to_date()
    with pytest.raises(errors, match=message):
        store.membership(h)
    assert ldstore.sdk_view(outcome(store.last_up_to_date), outcome(store.membership, h)) == (None, "STORE_ERROR")
