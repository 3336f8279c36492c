"""The real processes the tests run: the bigseg server binary, private redis-server processes
(stopped and started again under bigseg), and MONITOR on a Redis, to record what a client sent.

Every wait is a poll of a condition with a deadline; nothing sleeps to let time pass.
"""

import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

import redis

DEADLINE_SECONDS = 15


def wait_for(what, cond, timeout=DEADLINE_SECONDS):
    """Polls cond() until it is true; fails after timeout (a bound, not a timing)."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)  # between polls of a condition


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_root():
    d = os.path.dirname(os.path.abspath(__file__))
    while True:
        gomod = os.path.join(d, "go.mod")
        if os.path.exists(gomod):
            with open(gomod) as f:
                if "module github.com/bigseg/bigseg\n" in f.read():
                    return d
        parent = os.path.dirname(d)
        if parent == d:
            raise RuntimeError("no parent directory holds the go.mod of github.com/bigseg/bigseg")
        d = parent


def build_server(into):
    """go build ./cmd/server from the repository root into the directory into."""
    out = os.path.join(into, "server")
    subprocess.run(["go", "build", "-o", out, "./cmd/server"], cwd=repo_root(), check=True)
    return out


class Bigseg:
    """A bigseg process on free loopback ports (HTTP and the Redis-protocol listener).

    settings are BIGSEG_* variables, the only environment it gets; it is ready once it has
    logged its listeners and its first status poll has completed.
    """

    def __init__(self, binary, **settings):
        env = {
            "BIGSEG_ADDR": "127.0.0.1:0",
            "BIGSEG_RESP_ADDR": "127.0.0.1:0",
            "BIGSEG_SHUTDOWN_DELAY": "0s",
            "BIGSEG_STATUS_POLL_INTERVAL": "50ms",
            **settings,
        }
        self.log = []
        self._lines = queue.Queue()
        self._proc = subprocess.Popen([binary], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.resp_addr = self._logged("Redis-protocol listener")["addr"]
            self.http_addr = self._logged("listening")["addr"]
            self.resp_host, port = self.resp_addr.rsplit(":", 1)
            self.resp_port = int(port)
            wait_for("bigseg's first status poll", lambda: self.status().get("checkedAt") is not None)
        except BaseException:
            self.stop()
            raise

    def _read(self):
        for line in self._proc.stderr:
            self.log.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _logged(self, msg):
        deadline = time.monotonic() + 30
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"bigseg did not log {msg!r} within 30s:\n{''.join(self.log)}") from None
            if line is None:
                raise AssertionError(f"bigseg exited ({self._proc.wait()}) before logging {msg!r}:\n{''.join(self.log)}")
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == msg:
                return entry

    def url(self, password=None, username=""):
        """Its Redis-protocol listener's redis:// URL, with credentials if given; database 0."""
        cred = f"{username}:{password}@" if password is not None else ""
        return f"redis://{cred}{self.resp_addr}/0"

    def status(self):
        try:
            with urllib.request.urlopen(f"http://{self.http_addr}/status", timeout=2) as res:
                return json.load(res)
        except OSError:
            return {}

    def metrics(self):
        """bigseg_resp_commands_total, as {(command, result): count} of the nonzero ones."""
        with urllib.request.urlopen(f"http://{self.http_addr}/metrics", timeout=2) as res:
            text = res.read().decode()
        counts = {}
        for line in text.splitlines():
            if line.startswith("bigseg_resp_commands_total{"):
                labels, value = line.rsplit(" ", 1)
                if float(value) > 0:
                    parts = dict(kv.split("=", 1) for kv in labels[labels.index("{") + 1:-1].split(","))
                    counts[(parts["command"].strip('"'), parts["result"].strip('"'))] = int(float(value))
        return counts

    def stop(self):
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join(timeout=5)


class RedisServer:
    """A private redis-server on a free loopback port, which a test can stop and start again.

    It saves nothing: stopped, its data is gone.
    """

    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.mkdtemp(prefix="bigseg-python-redis-")
        self._proc = None
        self.start()

    def start(self):
        self._proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self._dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers():
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as r:
                    return r.ping()
            except redis.exceptions.ConnectionError:
                return False

        wait_for("redis-server to answer PING", answers)

    def client(self):
        return redis.Redis(port=self.port)

    def stop(self):
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=15)

    def remove(self):
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


class Monitor:
    """MONITOR on a Redis: the commands it runs, each as (client address, [args]).

    Redis shows neither AUTH nor the arguments of HELLO, and nothing it refused to run (an
    unknown command or subcommand).
    """

    def __init__(self, port):
        self.seen = []
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self._sock.sendall(b"MONITOR\r\n")
        self._file = self._sock.makefile("rb")
        if self._file.readline() != b"+OK\r\n":
            raise AssertionError("MONITOR was refused")
        self._sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        try:
            for raw in self._file:
                line = raw.decode("latin-1").rstrip("\r\n")
                # +1700000000.123456 [0 127.0.0.1:54321] "GET" "key"
                if not line.startswith("+") or " [" not in line:
                    continue
                client = line.split(" [", 1)[1].split("] ", 1)
                addr = client[0].split(" ", 1)[1]
                self.seen.append((addr, parse_monitor_args(client[1])))
        except (OSError, ValueError):
            pass  # closed

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(timeout=5)


def parse_monitor_args(s):
    """The double-quoted arguments of a MONITOR line, with Redis's escapes undone."""
    args, i = [], 0
    escapes = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b"}
    while i < len(s):
        if s[i] == " ":
            i += 1
            continue
        if s[i] != '"':
            raise ValueError(f"unexpected MONITOR line: {s}")
        i += 1
        v = []
        while i < len(s) and s[i] != '"':
            if s[i] != "\\":
                v.append(s[i])
                i += 1
            elif s[i + 1] == "x":
                v.append(chr(int(s[i + 2:i + 4], 16)))
                i += 4
            else:
                v.append(escapes.get(s[i + 1], s[i + 1]))
                i += 2
        i += 1
        args.append("".join(v))
    return args
