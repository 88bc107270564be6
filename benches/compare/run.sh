#!/usr/bin/env bash
# Compares fairyring with Hocuspocus and @y/websocket-server under the same Rust load generator
# (`fairyring bench --url …`): same clients, same rates, one server at a time on loopback.
# Installs the Node servers into target/compare (npm), starts each, runs the bench at each
# rate in its own room, and prints one table with ratios (fairyring over the others).
#
#   benches/compare/run.sh                      # 100 clients, rates 5 10 20 /s, 10 s each
#   CLIENTS=100 RATES="5 10 20 40" DURATION=15 benches/compare/run.sh
#
# fairyring runs its release build with a SQLite store (durable: every update is committed
# before it is broadcast); the Node servers keep documents in memory only.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/benches/compare"
SCRATCH="$ROOT/target/compare"
CLIENTS="${CLIENTS:-100}"
RATES="${RATES:-5 10 20}"
DURATION="${DURATION:-10}"
STORE="${STORE:-sqlite}"
BIN="$ROOT/target/release/fairyring"

mkdir -p "$SCRATCH"
cp "$HERE/package.json" "$HERE"/*.mjs "$SCRATCH/"
if [ ! -d "$SCRATCH/node_modules/@hocuspocus/server" ] || [ ! -d "$SCRATCH/node_modules/@y/websocket-server" ]; then
  (cd "$SCRATCH" && npm install --no-audit --no-fund >/dev/null)
fi
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin fairyring)

RESULTS="$SCRATCH/results.jsonl"
: > "$RESULTS"
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
trap stop_server EXIT

# Starts a server command in the background; waits for its first line; sets SERVER_PID and
# LINE (the first line it printed).
start_server() {
  local log="$SCRATCH/$1.log"; shift
  "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    LINE="$(head -n 1 "$log" 2>/dev/null || true)"
    [ -n "$LINE" ] && return 0
    sleep 0.1
  done
  echo "server did not start: $*" >&2
  cat "$log" >&2
  exit 1
}

run_bench() { # name url protocol
  for rate in $RATES; do
    echo "== $1, $CLIENTS clients x $rate/s" >&2
    "$BIN" bench --url "$2" --protocol "$3" --server-pid "$SERVER_PID" \
      --clients "$CLIENTS" --rate "$rate" --duration "$DURATION" \
      --room "cmp-$rate" --json \
      | sed "s/^{/{\"server\":\"$1\",/" >> "$RESULTS"
  done
}

if [ "$STORE" = memory ]; then FR_STORE="memory:"; else
  rm -f "$SCRATCH/fairyring.db"*; FR_STORE="sqlite:$SCRATCH/fairyring.db"; fi
start_server fairyring env RUST_LOG=warn "$BIN" serve --listen 127.0.0.1:0 --insecure-no-auth \
  --max-connections-per-room 100000 --store "$FR_STORE"
ADDR="${LINE#listening on http://}"
run_bench fairyring "ws://$ADDR" y-sync
stop_server

start_server hocuspocus node "$SCRATCH/hocuspocus.mjs" 18235
run_bench hocuspocus "ws://127.0.0.1:18235/{room}" hocuspocus
stop_server

start_server y-websocket node "$SCRATCH/y-websocket.mjs" 18234
run_bench y-websocket "ws://127.0.0.1:18234/{room}" y-sync
stop_server

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
node "$HERE/table.mjs" "$RESULTS"
