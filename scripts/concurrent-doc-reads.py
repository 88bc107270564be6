"""30 concurrent GET /doc of a 20 MB room (issue 43 finding 4): RSS before and peak after.
Usage: python3 scripts/concurrent-doc-reads.py BINARY (a fairyring binary; it is started on a memory
store). Figures: docs/benchmarks.md 2026-11-27."""
import json, subprocess, sys, threading, time, urllib.request, os, re

binary = sys.argv[1]
env = dict(os.environ, RUST_LOG="warn", FAIRYRING_RATE_BYTES_PER_SEC="100000000", FAIRYRING_HISTORY_MAX_BYTES="0")
proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--insecure-no-auth", "--store", "memory:"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
line = proc.stdout.readline().decode()
base = line.strip().replace("listening on ", "")
def status(field):
    text = open(f"/proc/{proc.pid}/status").read()
    return int(re.search(field + r":\s+(\d+) kB", text).group(1)) // 1024
try:
    for i in range(20):
        body = json.dumps({"create": [{"id": f"t{i}", "type": "text", "text": chr(97 + i) * 990000}]}).encode()
        req = urllib.request.Request(f"{base}/rooms/big/shapes", data=body, method="PATCH", headers={"content-type": "application/json"})
        urllib.request.urlopen(req).read()
    urllib.request.urlopen(f"{base}/rooms/big/versions?at=99999999999999").read()
    idle = status("VmRSS")
    sizes = []
    def get():
        with urllib.request.urlopen(f"{base}/rooms/big/doc") as r:
            sizes.append(len(r.read()))
    t0 = time.time()
    threads = [threading.Thread(target=get) for _ in range(30)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(f"30 concurrent GET /doc of a {sizes[0] >> 20} MB room: RSS {idle} MB before, peak {status('VmHWM')} MB, {time.time() - t0:.1f} s, {len(sizes)} answers")
finally:
    proc.kill()
