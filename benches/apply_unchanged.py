#!/usr/bin/env python3
"""apply_config of 1,000 stopped servers, then re-applying the same file unchanged, as whole processes.

A Claude Desktop file with 1,000 stdio servers (`npx -y @example/server-N`, one env value each) is imported into an
empty data dir, then imported again N times unchanged. Each process is timed by wall clock and by the CPU time the
kernel charged it (user + system, from wait4's rusage), which is steadier on a shared machine. `show` of one server is
the process floor (start, open the database, print). The database files' SHA-256 before and after the re-applies
tells whether they wrote anything.

Usage: benches/apply_unchanged.py PATH/TO/agent-discover [N]"""

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, env):
    """(wall ms, cpu ms, stdout) of one process: CPU is user + system time from wait4's rusage (microseconds)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = (time.monotonic() - t0) * 1000
        if p.returncode:
            err.seek(0)
            raise SystemExit(f"{argv} failed: {err.read().decode()}")
    return wall, (ru.ru_utime + ru.ru_stime) * 1000, out


def digest(data):
    h = hashlib.sha256()
    for name in sorted(os.listdir(data)):
        if ".db" in name:
            with open(os.path.join(data, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def main():
    exe = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        path = os.path.join(tmp, "claude_desktop_config.json")
        servers = {f"srv-{i:04}": {"command": "npx", "args": ["-y", f"@example/server-{i}"], "env": {"LEVEL": str(i)}}
                   for i in range(1000)}
        with open(path, "w") as f:
            json.dump({"mcpServers": servers}, f)
        env = dict(os.environ, HOME=tmp, AGENT_DISCOVER_DATA_DIR=data, AGENT_DISCOVER_DASHBOARD="off",
                   AGENT_DISCOVER_MODEL_SOURCE="off")
        env.pop("AGENT_DISCOVER_DB", None)
        imp = [exe, "import", path, "--format", "claude-desktop", "--json"]
        wall, cpu, out = timed(imp, env)
        results = json.loads(out)["results"]
        assert len(results) == 1000 and all(r["action"] == "added" for r in results), results[:3]
        print(f"first apply of 1,000 servers: wall {wall:.1f} ms, cpu {cpu:.1f} ms")
        before = digest(data)
        walls, cpus = [], []
        for _ in range(n):
            wall, cpu, out = timed(imp, env)
            results = json.loads(out)["results"]
            assert all(r["action"] == "unchanged" for r in results), [r for r in results if r["action"] != "unchanged"][:3]
            walls.append(wall)
            cpus.append(cpu)
        after = digest(data)
        floor_w, floor_c = [], []
        for _ in range(n):
            wall, cpu, _ = timed([exe, "show", "srv-0000", "--json"], env)
            floor_w.append(wall)
            floor_c.append(cpu)
    load = os.getloadavg()
    med = statistics.median
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"re-apply unchanged ({n} runs): wall median {med(walls):.1f} ms (min {min(walls):.1f}, max {max(walls):.1f}); "
          f"cpu median {med(cpus):.1f} ms (min {min(cpus):.1f}, max {max(cpus):.1f})")
    print(f"process floor, `show` ({n} runs): wall median {med(floor_w):.1f} ms; cpu median {med(floor_c):.1f} ms")
    print(f"database files {'unchanged' if before == after else 'CHANGED'} by the re-applies (SHA-256)")


if __name__ == "__main__":
    main()
