#!/usr/bin/env bash
# A soak of one server (docs/operations.md "… the server runs for hours (soak)"): starts
# `fairyring serve` as `fairyring bench` starts one (SQLite in a scratch directory, rooms
# unloading 1 s after their last client, no fairy API limits), runs
# `fairyring bench --soak MINUTES --url … --server-pid …` against it with the flags given after
# MINUTES (default: 10 people at 5 updates/s), then waits for the rooms to unload and prints the
# server's RSS before the load and after it, with the room's size: what the soak's samples, taken
# while the room's document grows, cannot tell apart (a leak, or the document).
#
#   scripts/soak.sh 60                                  # the debug binary
#   FAIRYRING_BIN=target/release/fairyring scripts/soak.sh 60 --clients 10 --rate 5
#
# Output: the bench's report in $SOAK_DIR/report.json (one JSON line; default directory
# target/soak), a summary on stdout; the exit status is the bench's.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:?usage: scripts/soak.sh MINUTES [bench flags]}
shift
BIN=${FAIRYRING_BIN:-target/debug/fairyring}
DIR=${SOAK_DIR:-target/soak}
mkdir -p "$DIR"
rm -f "$DIR"/soak.db*
[ "$#" -gt 0 ] || set -- --clients 10 --rate 5

"$BIN" serve --listen 127.0.0.1:0 --insecure-no-auth --store "sqlite:$DIR/soak.db" \
  --idle-unload 1 --fairy-api-rate-per-min 0 --fairy-token-budget 0 \
  > "$DIR/server.out" 2> "$DIR/server.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q '^listening on' "$DIR/server.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's|^listening on http://||p' "$DIR/server.out")
[ -n "$ADDR" ] || { cat "$DIR/server.log"; exit 1; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$server/status"; }
loaded() { curl -sf "http://$ADDR/metrics" | awk '/^fairyring_rooms_loaded / {print $2}'; }

before=$(rss)
echo "server $server on $ADDR, RSS $before KiB; soak of $MINUTES minutes: $*  (load $(cut -d' ' -f1-3 /proc/loadavg))"
status=0
"$BIN" bench --soak "$MINUTES" --url "ws://$ADDR" --server-pid "$server" \
  --store "sqlite:$DIR/soak.db" --json "$@" > "$DIR/report.json" || status=$?
ended=$(date +%s)
until [ "$(loaded)" = 0 ] || [ $(( $(date +%s) - ended )) -gt 30 ]; do sleep 0.2; done
# The least of 5 samples a second apart: jemalloc hands freed pages back about a second after
# they are freed (later on a loaded machine); one sample at the unload still holds them.
after=$(rss)
for _ in 1 2 3 4 5; do sleep 1; now=$(rss); [ "$now" -lt "$after" ] && after=$now; done
python3 - "$DIR/report.json" "$before" "$after" "$(loaded)" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
s = r["samples"]
print(f"{len(s)} samples; RSS KiB first {s[0]['rss_kib']}, last {s[-1]['rss_kib']}, "
      f"peak {max(x['rss_kib'] or 0 for x in s)}; store {s[0]['store_bytes']} -> {s[-1]['store_bytes']} B")
print(f"fds {r['baseline']['fds']} -> {r['after_clients_left']['fds']}, "
      f"threads {r['baseline']['tasks']} -> {r['after_clients_left']['tasks']}")
print(f"RSS before the load {sys.argv[2]} KiB, after the rooms unloaded {sys.argv[3]} KiB "
      f"(rooms loaded: {sys.argv[4]})")
for c in r["checks"]:
    print(("ok   " if c["passed"] else "FAIL ") + c["name"] + ": " + c["detail"])
print("fairy prompts", r["fairy_prompts"], "exports", r["exports"]["answers_by_status"],
      "history reads", r["history_reads_by_status"], "REST writes", r["rest_writes_by_status"])
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
