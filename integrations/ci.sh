#!/usr/bin/env bash
# CI for the SDK adapters (integrations/): from a clean clone with Go and a Redis at
# 127.0.0.1:6379 (started, and redis-server installed, if missing), checks and tests the Go
# adapter (ldbigseg, with -race) and the Node adapter (installing Node and its packages with
# npm ci if missing), and the SDKs' own Redis Big Segment stores against bigseg's
# Redis-protocol listener: Node's @launchdarkly/node-server-sdk-redis (in npm test) and the
# Python SDK's calls through redis-py (pytest; python3-redis and python3-pytest installed if
# missing); all against the real bigseg server built from this repository, which the Go and
# Node store suites (and one Go SDK evaluation) also read a DynamoDB table with, on moto_server
# (moto's emulator; it must be on PATH: Debian has no package of it, so nothing is installed).
# Exits non-zero on any failure. Takes about a minute once Go's build cache is warm.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"

apt_install() {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

redis_up() {
  (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && IFS= read -r -t 2 line <&3 && [[ $line == +PONG* ]]) 2>/dev/null
}

echo "== Redis"
# The tests also start redis-server processes of their own (to stop Redis under bigseg).
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  apt_install redis-server redis-tools
fi
if ! redis_up; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --logfile /tmp/bigseg-integrations-ci-redis.log
  for _ in $(seq 50); do redis_up && break; sleep 0.1; done
  redis_up || { echo "Redis did not start"; exit 1; }
fi
echo "Redis answers on 127.0.0.1:6379"

echo "== moto_server (DynamoDB's emulator, for the store suites on DynamoDB)"
# The Go and Node tests start one each; with BIGSEG_TEST_REQUIRE_REDIS=1 they fail without
# it, so say so here, before anything runs.
if ! command -v moto_server >/dev/null; then
  echo "moto_server is not on PATH: install moto with its server (pip install 'moto[server]'), which the DynamoDB tests need"
  exit 1
fi
echo "moto_server: $(command -v moto_server)"

echo "== ldbigseg: gofmt, go vet, go mod tidy"
(
  cd ldbigseg
  unformatted=$(gofmt -l .)
  [ -z "$unformatted" ] || { echo "gofmt would change: $unformatted"; exit 1; }
  go vet ./...
  go mod tidy -diff
)

echo "== the bigseg server, built once for both test suites"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd .. && go build -o "$tmp/server" ./cmd/server)
export BIGSEG_SERVER_BIN="$tmp/server" BIGSEG_TEST_REQUIRE_REDIS=1

echo "== ldbigseg tests (-race)"
(cd ldbigseg && go test -race -count=1 ./...)

echo "== Node"
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null || [ "$(node_major)" -lt 18 ]; then
  apt_install nodejs npm
fi
[ "$(node_major)" -ge 18 ] || { echo "Node 18 or newer is required, found $(node --version 2>&1)"; exit 1; }
echo "node $(node --version), npm $(npm --version)"
(
  cd node
  npm ci --no-audit --no-fund
  npm run --silent typecheck
  npm test
)

echo "== Python (redis-py: the calls of the LaunchDarkly Python SDK's Redis Big Segment stores)"
# Debian's python3-redis and python3-pytest are seen by Debian's own interpreter only, not by
# another python3 earlier in PATH (pyenv's, say).
python=/usr/bin/python3
if ! "$python" -c 'import pytest, redis, redis.asyncio' 2>/dev/null; then
  apt_install python3 python3-redis python3-pytest
fi
"$python" -c 'import pytest, redis; print("python", __import__("sys").version.split()[0], "redis-py", redis.__version__, "pytest", pytest.__version__)'
(cd python && PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -v)
echo "integrations: all passed"
