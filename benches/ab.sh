#!/usr/bin/env bash
# A/B of two fairyring server builds under one bench, interleaved (A B A B …) so that both
# share the machine's noise. Each run starts a fresh server on a fresh SQLite file, runs
# `fairyring bench --url … --server-pid …` from BENCH (default: build B, which must then be
# built with `--features dev-tools`: the bench is developer tooling) and scrapes the
# server's store-commit histogram from /metrics afterwards. Prints one JSON line per run.
#
#   benches/ab.sh OLD_BINARY NEW_BINARY [bench flags…]
#   RUNS=3 benches/ab.sh /tmp/fairyring-main target/release/fairyring --clients 100 --rate 5
#   STORE=memory: … (default: a fresh sqlite file per run)
#
# Raise `ulimit -n` for thousands of clients. The bench's own flags (--clients, --rooms,
# --rate, --duration, --unload-wait) pass through.
set -euo pipefail
A="$1"; B="$2"; shift 2
BENCH="${BENCH:-$B}"
RUNS="${RUNS:-2}"
SCRATCH="$(mktemp -d)"
trap 'kill "${PID:-0}" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT

run_one() {
  local label="$1" bin="$2"; shift 2
  local store="${STORE:-sqlite:$SCRATCH/$label-$RANDOM.db}"
  rm -f "$SCRATCH/out" "$SCRATCH/err"
  "$bin" serve --listen 127.0.0.1:0 --insecure-no-auth --max-connections-per-room 100000 \
    --max-connections 100000 --max-rooms 20000 --idle-unload 1 --store "$store" \
    > "$SCRATCH/out" 2> "$SCRATCH/err" &
  PID=$!
  local line=""
  for _ in $(seq 1 100); do
    line="$(grep -m 1 '^listening on' "$SCRATCH/out" 2>/dev/null || true)"
    [ -n "$line" ] && break
    sleep 0.1
  done
  local addr="${line#listening on http://}"
  local report
  report="$("$BENCH" bench --url "ws://$addr" --server-pid "$PID" --json "$@")"
  # Store commits: count, sum and the buckets' upper bounds, from the server's /metrics.
  local commits
  commits="$(curl -s "http://$addr/metrics" | grep -v '^#' | grep 'store_commit_seconds' | tr -d '"' | tr '\n' ';' || true)"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  printf '{"build":"%s","report":%s,"store_commit":"%s"}\n' "$label" "$report" "$commits"
}

for _ in $(seq 1 "$RUNS"); do
  run_one A "$A" "$@"
  run_one B "$B" "$@"
done
