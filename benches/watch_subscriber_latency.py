#!/usr/bin/env python3
"""Latency from a save of a watched client config to a subscriber holding the new registry snapshot.

Two processes on one data dir, as in use: `agent-discover serve --port 0` (the subscriber reads its Server-Sent Events
at /api/registry/events) and `agent-discover import FILE --watch` (applies each save). Each save (write a temp file,
rename it over the watched one, as editors do) keeps servers s0..s9 and swaps one extra server for a new one, so the
snapshot changes visibly; the clock runs from the rename to the SSE event whose servers include the new one. It
crosses processes: the watcher commits, and the dashboard's feed hears of it through the database (file watch plus
PRAGMA data_version). The debounce (150 ms) is included in the raw figure and subtracted in the reported one.

Usage: benches/watch_subscriber_latency.py PATH/TO/agent-discover [N]"""

import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

DEBOUNCE_MS = 150


def pct(sorted_xs, p):
    """Nearest-rank percentile of an ascending list."""
    k = max(0, min(len(sorted_xs) - 1, int(round(p / 100 * len(sorted_xs) + 0.5)) - 1))
    return sorted_xs[k]


def sse_reader(url, out):
    """Puts (monotonic time, set of server names) for every snapshot event."""
    with urllib.request.urlopen(url, timeout=600) as resp:
        data = []
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line == "" and data:
                snap = json.loads("\n".join(data))
                out.put((time.monotonic(), {s["name"] for s in snap["servers"]}))
                data = []


def main():
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        path = os.path.join(tmp, ".mcp.json")

        def save(i):
            names = [f"s{j}" for j in range(10)] + [f"extra{i}"]
            servers = ", ".join(f'"{s}": {{"command": "true", "args": ["{s}"]}}' for s in names)
            with open(path + ".tmp", "w") as f:
                f.write('{"mcpServers": {' + servers + "}}")
            os.rename(path + ".tmp", path)

        save(0)
        env = dict(os.environ, HOME=tmp, AGENT_DISCOVER_MODEL_SOURCE="off", AGENT_DISCOVER_DASHBOARD="off")
        env.pop("AGENT_DISCOVER_DB", None)
        serve = subprocess.Popen([exe, "--data-dir", data, "serve", "--port", "0"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, env=env)
        watch = None
        try:
            base = serve.stdout.readline().strip().rstrip("/")
            snaps = queue.Queue()
            threading.Thread(target=sse_reader, args=(base + "/api/registry/events", snaps), daemon=True).start()
            snaps.get(timeout=30)  # the bootstrap
            watch = subprocess.Popen([exe, "--data-dir", data, "import", path, "--watch"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)
            for line in watch.stdout:
                if line.startswith("watching"):
                    break

            def wait_for(name):
                while True:
                    t, names = snaps.get(timeout=30)
                    if name in names:
                        return t

            wait_for("extra0")
            to_sub, to_applied = [], []
            for i in range(1, n + 1):
                t0 = time.monotonic()
                save(i)
                for line in watch.stdout:
                    if line.startswith("applied"):
                        break
                    if line.startswith("error"):
                        raise SystemExit(line)
                to_applied.append((time.monotonic() - t0) * 1000)
                to_sub.append((wait_for(f"extra{i}") - t0) * 1000)
        finally:
            for p in (watch, serve):
                if p:
                    p.terminate()
                    p.wait()
    load = os.getloadavg()
    after = sorted(s - DEBOUNCE_MS for s in to_sub)
    applied = sorted(s - DEBOUNCE_MS for s in to_applied)
    print(f"{n} saves of 11 servers (one swapped each time); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"save -> watcher's `applied` line, after the debounce: p50 {pct(applied, 50):.1f} ms, "
          f"p99 {pct(applied, 99):.1f} ms")
    print(f"save -> SSE subscriber of another process, after the debounce: p50 {pct(after, 50):.1f} ms, "
          f"p99 {pct(after, 99):.1f} ms, max {after[-1]:.1f} ms")


if __name__ == "__main__":
    main()
