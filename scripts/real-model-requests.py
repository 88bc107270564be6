#!/usr/bin/env python3
"""Fairy requests in a row against a fairyring server whose fairies run on a real model
(scripts/real-model.sh starts both). The same checks as tests/fairies/real_model.rs, from outside:
each request ends (done, or failed with a chat message) within the turn cap, leaves no locked
shape and puts no `<think>` text on the canvas. Prints each request's end and, over all model
turns, the time from a turn's start to its first streamed action (the prompt read and the
answer's first tokens: an upper bound on the time to the first token), the output tokens per
second while generating and the cached share of the prompt tokens.

    scripts/real-model-requests.py http://127.0.0.1:8091 ROOM FAIRY_ID N [TURN_CAP [EVENTS_FILE]]

Every event goes to EVENTS_FILE (one JSON line each: request, seconds since its prompt, event)
when one is named. Exits non-zero when a check fails. Standard library only.
"""
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.request


def test_prompts():
    """The ten prompts of tests/fairies/real_model.rs (its `PROMPTS`), so that both send the same."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fairies", "real_model.rs")
    text = open(path, encoding="utf-8").read()
    block = re.search(r"const PROMPTS: \[&str; \d+\] = \[(.*?)\];", text, re.S)
    prompts = json.loads("[" + block.group(1).strip().rstrip(",") + "]") if block else []
    if not prompts:
        sys.exit(f"no PROMPTS in {path}")
    return prompts


LIMIT = 1800  # seconds a request may take (a first byte may take minutes on a loaded CPU)


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def post_json(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return r.status, r.read()


def one_request(http, room, fairy, message):
    """The request's events, each as (seconds since the prompt, data)."""
    events = urllib.request.urlopen(f"{http}/rooms/{room}/fairies/{fairy}/events", timeout=LIMIT)
    seen, started = [], [None]

    def read():
        for raw in events:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if not line.startswith("data: ") or started[0] is None:
                continue
            try:
                data = json.loads(line[6:])
            except ValueError:
                continue
            # A request the previous one timed out on ends (interrupted) when this one starts:
            # its events are not this request's.
            if not seen and data.get("type") != "request-started":
                continue
            seen.append((time.monotonic() - started[0], data))
            if data.get("type") == "request-ended":
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.5)  # the stream is open before the prompt (no event is missed)
    started[0] = time.monotonic()
    status, body = post_json(f"{http}/rooms/{room}/fairies/{fairy}/prompt",
                             {"message": message, "bounds": {"x": 0, "y": 0, "w": 1200, "h": 800}})
    assert status == 202, body
    reader.join(LIMIT)
    events.close()
    return seen


def main():
    http, room, fairy, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cap = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    log = open(sys.argv[6], "w") if len(sys.argv) > 6 else None
    prompts = test_prompts()
    failures, first_action, gen_tokens, gen_secs = [], [], 0, 0.0
    prompt_tokens = cached = output = calls = estimated = 0
    started_all = time.monotonic()
    for i in range(n):
        message = prompts[i % len(prompts)]
        seen = one_request(http, room, fairy, message)
        if log:
            for t, d in seen:
                log.write(json.dumps({"request": i, "at": round(t, 3), "event": d}) + "\n")
            log.flush()
        of = lambda kind: [(t, d) for t, d in seen if d.get("type") == kind]
        ended = of("request-ended")
        reason = ended[0][1].get("reason") if ended else None
        turns = [t for t, _ in of("turn-started")]
        for k, start in enumerate(turns):
            end = turns[k + 1] if k + 1 < len(turns) else float("inf")
            actions = [t for t, _ in of("action") if start <= t < end]
            usage = [(t, d) for t, d in of("usage") if start <= t < end]
            if actions:
                first_action.append(actions[0] - start)
                if usage:
                    gen_tokens += usage[0][1].get("outputTokens", 0)
                    gen_secs += max(usage[0][0] - actions[0], 0.0)
        for _, u in of("usage"):
            calls += 1
            output += u.get("outputTokens", 0)
            if u.get("estimated"):
                # Counted from characters, with no cache figure: left out of the cached share.
                estimated += 1
                continue
            read = u.get("cacheReadInputTokens", 0)
            prompt_tokens += u.get("inputTokens", 0) + read
            cached += read
        doc = get_json(f"{http}/rooms/{room}/doc").get("doc") or {}
        shapes = doc.get("shapes") or {}
        locked = [k for k, s in shapes.items() if isinstance(s, dict) and s.get("locked") is True]
        chat = [c.get("text", "") for c in ((doc.get("fairies") or {}).get(fairy, {}).get("chat") or [])]
        completed = sum(1 for _, d in of("action") if d.get("complete"))
        rejected = len(of("action-rejected"))
        elapsed = seen[-1][0] if seen else float("nan")
        print(f"{message!r}: {reason} after {elapsed:.1f} s, {len(turns)} turns, {completed} actions "
              f"completed, {rejected} rejected, {len(shapes)} shapes on the canvas", flush=True)
        if reason not in ("done", "error", "max-iterations"):
            failures.append(f"{message!r}: ended {reason!r}")
        if len(turns) > cap:
            failures.append(f"{message!r}: {len(turns)} turns (cap {cap})")
        if locked:
            failures.append(f"{message!r}: locked shapes {locked}")
        if "<think>" in json.dumps(shapes):
            failures.append(f"{message!r}: reasoning on the canvas")
        if reason == "error" and not (chat and (chat[-1].startswith("Sorry") or chat[-1].startswith("I stopped"))):
            failures.append(f"{message!r}: a failure without a chat message: {chat[-1:]}")
    total = time.monotonic() - started_all
    first_action.sort()
    median = statistics.median(first_action) if first_action else float("nan")
    print(f"{n} requests, {calls} model calls in {total:.0f} s; time to the first action per turn: "
          f"median {median:.1f} s, min {min(first_action, default=float('nan')):.1f} s, "
          f"max {max(first_action, default=float('nan')):.1f} s (over {len(first_action)} turns that "
          f"streamed one); output {gen_tokens / max(gen_secs, 1e-3):.1f} tokens/s while generating "
          f"({gen_tokens} tokens in {gen_secs:.0f} s), {output} output tokens in all; "
          f"{estimated} of the {calls} calls' usage estimated (stream dropped before the provider's "
          f"final report); over the {calls - estimated} reported, prompt tokens {prompt_tokens} "
          f"({prompt_tokens / max(calls - estimated, 1):.0f} per call), cached share "
          f"{cached * 100 / max(prompt_tokens, 1):.0f} %")
    for f in failures:
        print("FAILED:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
