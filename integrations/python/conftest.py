"""Fixtures: the bigseg binary, the shared Redis under a key prefix per test, private
redis-server processes, and bigseg processes, each stopped or removed when its test ends.

Settings, as the Go and Node tests read them: BIGSEG_SERVER_BIN (else the server is built with
go build), BIGSEG_TEST_REDIS_URL (default redis://127.0.0.1:6379), BIGSEG_TEST_REQUIRE_REDIS=1
to fail rather than skip when Redis or redis-server is missing.
"""

import os
import secrets
import shutil
import tempfile
import time

import pytest
import redis

import ldstore
from processes import Bigseg, RedisServer, build_server

REQUIRE_REDIS = os.environ.get("BIGSEG_TEST_REQUIRE_REDIS") == "1"
SHARED_REDIS_URL = os.environ.get("BIGSEG_TEST_REDIS_URL", "redis://127.0.0.1:6379")


def _missing(why):
    if REQUIRE_REDIS:
        pytest.fail(f"{why} (BIGSEG_TEST_REQUIRE_REDIS=1)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def server_bin():
    if os.environ.get("BIGSEG_SERVER_BIN"):
        yield os.environ["BIGSEG_SERVER_BIN"]
        return
    d = tempfile.mkdtemp(prefix="bigseg-python-test-")
    try:
        yield build_server(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_redis_url():
    return SHARED_REDIS_URL


@pytest.fixture(scope="session")
def shared_redis():
    r = redis.Redis.from_url(SHARED_REDIS_URL)
    try:
        r.ping()
    except redis.exceptions.ConnectionError as e:
        _missing(f"no Redis at {SHARED_REDIS_URL}: {e}")
    yield r
    r.close()


class Layout:
    """Writes Big Segments data in LaunchDarkly's Redis layout under prefix, as a synchronizer does."""

    def __init__(self, r, prefix):
        self.r = r
        self.prefix = prefix

    def set_synchronized_on(self, ms):
        self.r.set(ldstore.synchronized_on_key(self.prefix), str(ms))

    def set_synchronized_now(self):
        ms = int(time.time() * 1000)
        self.set_synchronized_on(ms)
        return ms

    def delete_synchronized_on(self):
        self.r.delete(ldstore.synchronized_on_key(self.prefix))

    def set_membership(self, context_hash, included=(), excluded=()):
        if included:
            self.r.sadd(ldstore.include_key(self.prefix, context_hash), *included)
        if excluded:
            self.r.sadd(ldstore.exclude_key(self.prefix, context_hash), *excluded)

    def clear(self):
        keys = list(self.r.scan_iter(match=f"{self.prefix}:*", count=1000))
        if keys:
            self.r.delete(*keys)


@pytest.fixture
def prefix(request):
    """A key prefix no other test uses."""
    name = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    return f"ldbigseg_python_{name}_{secrets.token_hex(4)}"


@pytest.fixture
def shared_layout(shared_redis, prefix):
    """The shared Redis's data under the test's prefix, deleted when the test ends."""
    layout = Layout(shared_redis, prefix)
    yield layout
    layout.clear()


@pytest.fixture
def redis_server():
    """A function starting private redis-server processes, removed when the test ends."""
    if shutil.which("redis-server") is None:
        _missing("redis-server is not installed")
    started = []

    def start():
        s = RedisServer()
        started.append(s)
        return s

    yield start
    for s in started:
        s.remove()


@pytest.fixture
def bigseg(server_bin):
    """A function starting bigseg processes (BIGSEG_* settings as keywords), stopped when the test ends."""
    started = []

    def start(**settings):
        p = Bigseg(server_bin, **settings)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()
