#!/usr/bin/env bash
# What each node of a scale-out deployment receives over pub/sub, against the share of rooms it
# holds (docs/scaling.md, "What a node receives").
#
# Starts four `fairyring serve` nodes (one PostgreSQL schema, one Redis prefix) and spreads
# rooms over them unevenly with three `fairyring bench --url X,Y` runs at once, each room with
# one client on each of its two nodes:
#   g1: 40 rooms on A and B, g2: 20 rooms on B and C, g3: 10 rooms on C and D
# (A holds 40 rooms, B 60, C 30, D 10; times SCALE). Then prints, per node, the rooms it holds, the room
# messages (and bytes) it received, its CPU seconds and RSS, and what it would have received if
# every node heard every room (all the other nodes' published room messages: the design before
# per-room subscriptions).
#
# MODE=spread instead runs one `fairyring bench` over the four nodes, each room on ROOM_NODES of
# them (`--room-nodes`: room r on nodes r mod 4 … r+K-1 mod 4) with every node's PID
# (`--server-pid a,b,c,d`), and prints the bench's report: per node its rooms, CPU, RSS and
# pub/sub messages and bytes in over the window; same-node and cross-node latency.
#
#   scripts/pubsub-figures.sh [BIN]    (BIN: default target/release/fairyring, built with
#                                       `cargo build --release --features dev-tools`: it runs the bench)
# Env: PG (postgres://postgres@127.0.0.1:5432/test), REDIS (redis://127.0.0.1:6379),
#      RATE (updates/s per client, 2), DURATION (s, 10), SCALE (rooms multiplier, 1),
#      EXTRA (more serve flags, e.g. --pubsub-sharded).
#      MODE=spread: ROOMS (400), ROOM_NODES (2), CLIENTS (2 × ROOMS), BENCH_FLAGS (e.g. --json).
set -euo pipefail
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/fairyring}
PG=${PG:-postgres://postgres@127.0.0.1:5432/test}
REDIS=${REDIS:-redis://127.0.0.1:6379}
RATE=${RATE:-2}
DURATION=${DURATION:-10}
SCALE=${SCALE:-1}
SCHEMA=figures_$$
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$PG" -q -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

NAMES=(A B C D)
ADDRS=()
for i in 0 1 2 3; do
  # shellcheck disable=SC2086
  "$BIN" serve --listen 127.0.0.1:0 --insecure-no-auth --store "$PG" --store-schema "$SCHEMA" \
    --pubsub "$REDIS" --idle-unload 60 ${EXTRA:-} >"$WORK/node$i.out" 2>"$WORK/node$i.err" &
  PIDS+=($!)
done
for i in 0 1 2 3; do
  for _ in $(seq 100); do
    addr=$(sed -n 's#^listening on http://##p' "$WORK/node$i.out" | head -1)
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "node $i did not start"; cat "$WORK/node$i.err"; exit 1; }
  ADDRS+=("$addr")
done

metric() { # node-index metric-line-prefix
  curl -s "http://${ADDRS[$1]}/metrics" | awk -v m="$2" 'index($0, m" ") == 1 { print $2; f=1 } END { if (!f) print 0 }'
}
cpu() { # pid: utime+stime in seconds
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}
rss() { awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

if [ "${MODE:-}" = spread ]; then
  ROOMS=${ROOMS:-400}
  URLS=$(printf 'ws://%s,' "${ADDRS[@]}")
  NODE_PIDS=$(IFS=,; echo "${PIDS[*]}")
  # CPU seconds of PostgreSQL (every postgres process; other clients of the server count too)
  # and of Redis over the whole bench (connects and warm-up included), on stderr.
  pg_cpu() {
    local pid total=0
    for pid in $(pgrep -x postgres); do
      total=$(awk -v t="$total" -v hz="$(getconf CLK_TCK)" '{ print t + ($14 + $15) / hz }' "/proc/$pid/stat" 2>/dev/null || echo "$total")
    done
    echo "$total"
  }
  redis_cpu() { redis-cli -u "$REDIS" info cpu | awk -F: '/^used_cpu_(sys|user):/ { t += $2 } END { print t + 0 }'; }
  echo "load before the run: $(uptime)" >&2
  pg0=$(pg_cpu); redis0=$(redis_cpu); started=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" bench --url "${URLS%,}" --server-pid "$NODE_PIDS" --room spread --rooms "$ROOMS" \
    --room-nodes "${ROOM_NODES:-2}" --clients "${CLIENTS:-$((ROOMS * 2))}" --rate "$RATE" \
    --duration "$DURATION" --unload-wait 0 ${BENCH_FLAGS:-}
  awk -v p0="$pg0" -v p1="$(pg_cpu)" -v r0="$redis0" -v r1="$(redis_cpu)" -v s="$started" -v e="$(date +%s.%N)" \
    'BEGIN { d = e - s; printf "over the %.0f s of the bench: PostgreSQL %.2f cores, Redis %.2f cores\n", d, (p1 - p0) / d, (r1 - r0) / d }' >&2
  exit 0
fi

IN='fairyring_pubsub_messages_total{reason="in"}'
OUT='fairyring_pubsub_messages_total{reason="out"}'
BIN_BYTES='fairyring_pubsub_bytes_total{reason="in"}'
declare -A before
for i in 0 1 2 3; do
  before[$i,in]=$(metric $i "$IN"); before[$i,out]=$(metric $i "$OUT")
  before[$i,bytes]=$(metric $i "$BIN_BYTES"); before[$i,cpu]=$(cpu "${PIDS[$i]}")
done

bench() { # name rooms node-a node-b
  "$BIN" bench --url "ws://${ADDRS[$3]},ws://${ADDRS[$4]}" --room "$1" --rooms "$2" \
    --clients $(($2 * 2)) --rate "$RATE" --duration "$DURATION" >"$WORK/$1.txt" 2>&1
}
started=$(date +%s.%N)
bench g1 $((40 * SCALE)) 0 1 &
b1=$!
bench g2 $((20 * SCALE)) 1 2 &
b2=$!
bench g3 $((10 * SCALE)) 2 3 &
b3=$!
wait $b1 $b2 $b3
elapsed=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
echo "bench reports:"; for g in g1 g2 g3; do head -3 "$WORK/$g.txt" | sed "s/^/  $g: /"; done

declare -A after
total_out=0
for i in 0 1 2 3; do
  after[$i,in]=$(metric $i "$IN"); after[$i,out]=$(metric $i "$OUT")
  after[$i,bytes]=$(metric $i "$BIN_BYTES"); after[$i,cpu]=$(cpu "${PIDS[$i]}")
  after[$i,rooms]=$(metric $i fairyring_rooms_loaded)
  total_out=$(awk -v t="$total_out" -v a="${after[$i,out]}" -v b="${before[$i,out]}" 'BEGIN { print t + a - b }')
done
total_rooms=$((70 * SCALE))
printf '\n%-4s %6s %7s %12s %12s %12s %22s %8s %7s\n' node rooms share "msgs in" "msgs in/s" "KiB in" "all rooms (msgs in)" "CPU s" "RSS MiB"
for i in 0 1 2 3; do
  awk -v n="${NAMES[$i]}" -v r="${after[$i,rooms]}" -v tr=$total_rooms \
      -v in0="${before[$i,in]}" -v in1="${after[$i,in]}" \
      -v o0="${before[$i,out]}" -v o1="${after[$i,out]}" -v to="$total_out" \
      -v b0="${before[$i,bytes]}" -v b1="${after[$i,bytes]}" \
      -v c0="${before[$i,cpu]}" -v c1="${after[$i,cpu]}" -v d="$elapsed" -v rss="$(rss "${PIDS[$i]}")" \
    'BEGIN { got = in1 - in0; all = to - (o1 - o0);
             printf "%-4s %6d %6.0f%% %12d %12.0f %12.0f %22d %8.2f %7s\n", n, r, 100 * r / tr, got, got / d, (b1 - b0) / 1024, all, c1 - c0, rss }'
done
echo "(msgs in: room messages received from other nodes during the ${elapsed%.*} s of the benches, connects and warm-up included;"
echo " all rooms: what the node would have received hearing every room = the others' published room messages)"
