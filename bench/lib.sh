# Shared by bench/paired and bench/instr (sourced, from the repository's root, with $tmp set to
# a scratch directory): building the servers to compare, and the embedded store they serve.

# build SPEC NAME: the server SPEC at $tmp/NAME ("tree", a git revision, or a patch applied to
# HEAD in a scratch worktree), or, for "chi", bench/ceiling's bare chi server at $tmp/ceiling.
build() {
  case $1 in
  chi) go build -o "$tmp/ceiling" ./bench/ceiling ;;
  tree) go build -o "$tmp/$2" ./cmd/server ;;
  *)
    git worktree add -q --detach "$tmp/src-$2" HEAD
    if [ -f "$1" ]; then git -C "$tmp/src-$2" apply "$PWD/$1"; else git -C "$tmp/src-$2" checkout -q "$1"; fi
    (cd "$tmp/src-$2" && go build -o "$tmp/$2" ./cmd/server)
    ;;
  esac
}

# write_fixture: $tmp/fixture.json, 1,000 contexts user-0 ... user-999 of three refs each.
write_fixture() {
  awk 'BEGIN { printf "{\"contexts\": {"; for (i = 0; i < 1000; i++) printf "%s\"user-%d\": {\"included\": [\"beta-users.g3\", \"early-access.g2\"], \"excluded\": [\"blocked.g1\"]}", (i ? ", " : ""), i; print "}}" }' >"$tmp/fixture.json"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_up PORT: waits until a server answers a lookup on PORT (for up to a minute).
wait_up() {
  for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$1/memberships/user-5" && return; sleep 0.1; done
  echo "server on :$1 did not start" >&2
  exit 1
}

# server_cmd SPEC NAME PORT: sets cmd_env and cmd to the environment and command line of server
# SPEC (built as NAME) on PORT: bigseg on the embedded store with every lookup cached, or the
# bare chi server answering with $tmp/body.json (a copy of a real answer).
server_cmd() {
  if [ "$1" = chi ]; then
    cmd_env=()
    cmd=("$tmp/ceiling" http -addr "127.0.0.1:$3" -body-file "$tmp/body.json"
      -header 'Content-Type: application/json' -header 'Cache-Control: no-store')
  else
    cmd_env=(BIGSEG_ADDR="127.0.0.1:$3" BIGSEG_SEED_FILE="$tmp/fixture.json" BIGSEG_CACHE_TTL=1h BIGSEG_LOG_LEVEL=error)
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
