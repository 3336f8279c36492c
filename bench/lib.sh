# Shared by bench/paired and bench/instr (sourced, from the repository's root, with $tmp set to
# a scratch directory): building the servers to compare, and the embedded store they serve.

# build SPEC NAME: the server SPEC at $tmp/NAME ("tree", a git revision, or a patch applied to
# HEAD in a scratch worktree), or, for "chi", bench/ceiling's bare chi server at $tmp/ceiling.
build() {
  case $1 in
  chi) go build -C bench -o "$tmp/ceiling" ./ceiling ;; # bench/ is a module of its own
  tree) go build -o "$tmp/$2" ./cmd/server ;;
  *)
    git worktree add -q --detach "$tmp/src-$2" HEAD
    if [ -f "$1" ]; then git -C "$tmp/src-$2" apply "$PWD/$1"; else git -C "$tmp/src-$2" checkout -q "$1"; fi
    (cd "$tmp/src-$2" && go build -o "$tmp/$2" ./cmd/server)
    ;;
  esac
}

# write_fixture [N]: $tmp/fixture.json, N (default 1,000) contexts user-0 ... of three refs each.
write_fixture() {
  awk -v n="${1:-1000}" 'BEGIN { printf "{\"contexts\": {"; for (i = 0; i < n; i++) printf "%s\"user-%d\": {\"included\": [\"beta-users.g3\", \"early-access.g2\"], \"excluded\": [\"blocked.g1\"]}", (i ? ", " : ""), i; print "}}" }' >"$tmp/fixture.json"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_up PORT: waits until a server answers a lookup on PORT (for up to a minute).
wait_up() {
  for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$1/memberships/user-5" && return; sleep 0.1; done
  echo "server on :$1 did not start" >&2
  exit 1
}

# server_cmd SPEC NAME PORT [STORE]: sets cmd_env and cmd to the environment and command line of
# server SPEC (built as NAME) on PORT: bigseg with every lookup cached, on the embedded store
# (STORE memory, the default) or on the store of start_store STORE (store_env_STORE), or the bare
# chi server answering with $tmp/body.json (a copy of a real answer).
server_cmd() {
  if [ "$1" = chi ]; then
    cmd_env=()
    cmd=("$tmp/ceiling" http -addr "127.0.0.1:$3" -body-file "$tmp/body.json"
      -header 'Content-Type: application/json' -header 'Cache-Control: no-store')
  else
    cmd_env=(BIGSEG_ADDR="127.0.0.1:$3" BIGSEG_CACHE_TTL=1h BIGSEG_LOG_LEVEL=error)
    # The fixture, in the embedded store unless the server reads a store of start_store.
    if [ "${4:-memory}" = memory ]; then
      cmd_env+=(BIGSEG_SEED_FILE="$tmp/fixture.json")
    else
      # A lookup that misses (the warm-up's) runs some 50 times slower under valgrind than
      # natively: the default timeout of a second would answer it 503. The write timeout must
      # outlast it (the server refuses a lookup timeout it could not write the answer of).
      local -n store_ref="store_env_$4"
      cmd_env+=("${store_ref[@]}" BIGSEG_LOOKUP_TIMEOUT=30s BIGSEG_WRITE_TIMEOUT=1m)
    fi
    cmd=("$tmp/$2")
  fi
}

# write_body NAME: $tmp/body.json, the answer of the bigseg server built as NAME for user-5,
# which the bare chi server then answers every request with.
write_body() {
  local port pid
  port=$(free_port)
  server_cmd tree "$1" "$port"
  env "${cmd_env[@]}" "${cmd[@]}" >/dev/null 2>&1 &
  pid=$!
  wait_up "$port"
  curl -s "http://127.0.0.1:$port/memberships/user-5" >"$tmp/body.json"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# start_store KIND BUILT: starts a private store of KIND on loopback, "redis" (redis-server) or
# "dynamodb" (moto_server, with a table of LaunchDarkly's layout), writes $tmp/fixture.json into
# it with `BUILT load` (a server built by build), and sets store_env_KIND to the variables that
# point a server at it (for DynamoDB, the AWS SDK's own, with fake credentials and no profile).
# The store runs until the calling script's cleanup kills its children.
start_store() {
  local port
  port=$(free_port)
  case $1 in
  redis)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    store_env_redis=(BIGSEG_REDIS_URL="redis://127.0.0.1:$port")
    ;;
  dynamodb)
    command -v moto_server >/dev/null || { echo "dynamodb needs moto_server (pip install 'moto[server]')" >&2; exit 1; }
    moto_server -H 127.0.0.1 -p "$port" >"$tmp/moto.log" 2>&1 &
    for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
    store_env_dynamodb=(BIGSEG_DYNAMODB_TABLE=bigseg AWS_REGION=us-east-1 AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
      AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_SESSION_TOKEN= AWS_PROFILE= AWS_EC2_METADATA_DISABLED=true
      AWS_CONFIG_FILE="$tmp/aws-none" AWS_SHARED_CREDENTIALS_FILE="$tmp/aws-none")
    python3 - "$port" <<'PY'
import sys, boto3
c = boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1",
                 aws_access_key_id="bench", aws_secret_access_key="bench")
c.create_table(TableName="bigseg", BillingMode="PAY_PER_REQUEST",
               AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("namespace", "key")],
               KeySchema=[{"AttributeName": "namespace", "KeyType": "HASH"}, {"AttributeName": "key", "KeyType": "RANGE"}])
PY
    ;;
  *) echo "unknown store $1 (redis, dynamodb)" >&2; exit 2 ;;
  esac
  local -n env_ref="store_env_$1"
  env "${env_ref[@]}" "$2" load "$tmp/fixture.json" >/dev/null 2>"$tmp/load.log" || { cat "$tmp/load.log" >&2; exit 1; }
}
