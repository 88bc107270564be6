"""REST write rates of one token (issue 43 finding 5): bytes/s through POST /update, rollbacks/s.
Usage: python3 scripts/rest-write-rate.py http://127.0.0.1:PORT [rollbacks]  (a server with
--insecure-no-auth; `rollbacks`: only the 300 rollbacks). Figures: docs/benchmarks.md 2026-11-27."""
import json, sys, time, urllib.request, urllib.error

base = sys.argv[1]
room = "rate"

def call(method, path, body=None, ctype="application/json"):
    req = urllib.request.Request(base + path, data=body, method=method, headers={"content-type": ctype})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

status, _ = call("PATCH", f"/rooms/{room}/shapes", json.dumps({"create": [{"id": "big", "type": "text", "text": "x" * 990000}]}).encode())
assert status == 200, status
status, blob = call("GET", f"/rooms/{room}/doc?format=yjs")
assert status == 200
only_rollbacks = len(sys.argv) > 2 and sys.argv[2] == "rollbacks"
ok = refused = 0
t0 = time.time()
while not only_rollbacks and time.time() - t0 < 5:
    status, _ = call("POST", f"/rooms/{room}/update", blob, "application/octet-stream")
    if status == 200:
        ok += 1
    else:
        refused += 1
elapsed = time.time() - t0
if not only_rollbacks:
    print(f"update: {len(blob)} B bodies, {ok} accepted, {refused} refused in {elapsed:.1f} s: {ok * len(blob) / elapsed / 1e6:.1f} MB/s accepted")
ok = refused = 0
t0 = time.time()
for i in range(300):
    status, _ = call("POST", f"/rooms/{room}/rollback", json.dumps({"actor": {"kind": "user", "id": "someone"}}).encode())
    if status == 200:
        ok += 1
    else:
        refused += 1
print(f"rollback: 300 asked in {time.time() - t0:.1f} s: {ok} done, {refused} refused")
