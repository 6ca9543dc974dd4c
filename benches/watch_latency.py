#!/usr/bin/env python3
"""Latency of `agent-discover import FILE --watch`: from a save (write + rename, as editors do) to the
`applied` line on its stdout, over N saves. The debounce (150 ms) is included in the raw figure and subtracted
in the reported one. Usage: benches/watch_latency.py PATH/TO/agent-discover [N]"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

DEBOUNCE_MS = 150


def main():
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        path = os.path.join(tmp, ".mcp.json")

        def save(i):
            servers = ", ".join(f'"s{j}": {{"command": "true", "args": ["{i}"]}}' for j in range(10))
            with open(path + ".tmp", "w") as f:
                f.write('{"mcpServers": {' + servers + "}}")
            os.rename(path + ".tmp", path)

        save(0)
        env = dict(os.environ, HOME=tmp)
        env.pop("AGENT_DISCOVER_DB", None)
        p = subprocess.Popen([exe, "--data-dir", data, "import", path, "--watch"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            for line in p.stdout:
                if line.startswith("watching"):
                    break
            samples = []
            for i in range(1, n + 1):
                t0 = time.monotonic()
                save(i)
                for line in p.stdout:
                    if line.startswith("applied"):
                        break
                    if line.startswith("error"):
                        raise SystemExit(line)
                samples.append((time.monotonic() - t0) * 1000)
        finally:
            p.terminate()
            p.wait()
    samples.sort()
    after = [s - DEBOUNCE_MS for s in samples]
    print(f"{n} saves of 10 servers: save -> applied median {statistics.median(samples):.1f} ms, "
          f"max {samples[-1]:.1f} ms; after the debounce: median {statistics.median(after):.1f} ms, max {after[-1]:.1f} ms")


if __name__ == "__main__":
    main()
