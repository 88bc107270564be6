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
SERVERS="${SERVERS:-fairyring hocuspocus y-websocket}"
BIN="$ROOT/target/release/fairyring"

mkdir -p "$SCRATCH"
cp "$HERE/package.json" "$HERE"/*.mjs "$SCRATCH/"
if [ ! -d "$SCRATCH/node_modules/@hocuspocus/server" ] || [ ! -d "$SCRATCH/node_modules/@y/websocket-server" ]; then
  (cd "$SCRATCH" && npm install --no-audit --no-fund >/dev/null)
fi
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --features dev-tools --bin fairyring)

RESULTS="$SCRATCH/results.jsonl"
# KEEP_RESULTS=1 adds to the previous run's results (e.g. SERVERS=y-websocket KEEP_RESULTS=1).
[ -n "${KEEP_RESULTS:-}" ] || : > "$RESULTS"
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
  rm -f "$log" "$log.err"
  "$@" > "$log" 2> "$log.err" &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    LINE="$(head -n 1 "$log" 2>/dev/null || true)"
    [ -n "$LINE" ] && return 0
    sleep 0.1
  done
  echo "server did not start: $*" >&2
  cat "$log" "$log.err" >&2
  exit 1
}

run_bench() { # name url protocol
  for rate in $RATES; do
    echo "== $1, $CLIENTS clients x $rate/s" >&2
    "$BIN" bench --url "$2" --protocol "$3" --server-pid "$SERVER_PID" \
      --clients "$CLIENTS" --rate "$rate" --duration "$DURATION" \
      --room "cmp-$rate" --json > "$SCRATCH/last.json" \
      || { echo "bench failed against $1 at $rate/s" >&2; continue; }
    sed "s/^{/{\"server\":\"$1\",/" "$SCRATCH/last.json" >> "$RESULTS"
  done
}

for server in $SERVERS; do
  case "$server" in
    fairyring)
      if [ "$STORE" = memory ]; then FR_STORE="memory:"; else
        rm -f "$SCRATCH/fairyring.db"*; FR_STORE="sqlite:$SCRATCH/fairyring.db"; fi
      start_server fairyring env RUST_LOG=warn "$BIN" serve --listen 127.0.0.1:0 \
        --insecure-no-auth --max-connections-per-room 100000 --store "$FR_STORE"
      run_bench fairyring "ws://${LINE#listening on http://}" y-sync ;;
    hocuspocus)
      start_server hocuspocus node "$SCRATCH/hocuspocus.mjs" 18235
      run_bench hocuspocus "ws://127.0.0.1:18235/{room}" hocuspocus ;;
    y-websocket)
      start_server y-websocket node "$SCRATCH/y-websocket.mjs" 18234
      run_bench y-websocket "ws://127.0.0.1:18234/{room}" y-sync ;;
    *) echo "unknown server $server" >&2; exit 2 ;;
  esac
  stop_server
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
node "$HERE/table.mjs" "$RESULTS"
