# What the sandbox adds to starting a child: `activate` (grants derived, spawn under the child guard, initialize,
# tools/list) through `agent-discover mcp`, timed by the client, with the sandbox on and off, for the fixture server
# (a binary) and for a Node package's script run by `node` (the grant engine walks its project and `node_modules`). A
# benchmark, not a test. Each round deactivates first, so every activation starts a fresh child.
#
# Usage (after `cargo build --release -p agent-discover -p ad-fixture` and scripts/test.sh, which installs the SDK):
#   .ci/cache/venv/bin/python benches/sandbox_spawn.py [ROUNDS] [fixture,node-script]
import os
import statistics
import sys
import tempfile
import time

import anyio
from mcp import Client, StdioServerParameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AGENT_DISCOVER_BIN") or os.path.join(ROOT, "target", "release", "agent-discover")
FIXTURE = os.environ.get("AGENT_DISCOVER_FIXTURE") or os.path.join(ROOT, "target", "release", "agent-discover-fixture")


EVERYTHING = os.path.join(ROOT, ".ci", "cache", "node", "node_modules", "@modelcontextprotocol", "server-everything",
                          "dist", "index.js")
SERVERS = {"fixture": (FIXTURE, []), "node-script": ("node", [EVERYTHING])}


async def run(sandbox: str, rounds: int, server: str = "fixture") -> list[float]:
    command, args = SERVERS[server]
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_EMBEDDING_PROVIDER="none",
               AGENT_DISCOVER_SANDBOX=sandbox)
    params = StdioServerParameters(command=BIN, args=["--data-dir", tempfile.mkdtemp(), "mcp"], env=env)
    out = []
    async with Client(params, mode="legacy", raise_exceptions=True) as client:
        r = await client.call_tool("registry", {"action": "install", "name": "fx", "command": command, "args": args})
        assert not r.is_error, r
        for _ in range(rounds):
            await client.call_tool("registry", {"action": "deactivate", "name": "fx"})
            t = time.perf_counter()
            r = await client.call_tool("registry", {"action": "activate", "name": "fx"})
            out.append((time.perf_counter() - t) * 1000)
            assert not r.is_error, r
    return out


def main() -> None:
    for p in (BIN, FIXTURE):
        if not os.path.isfile(p):
            sys.exit(f"{p} is missing: run `cargo build --release -p agent-discover -p ad-fixture` first")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    servers = sys.argv[2].split(",") if len(sys.argv) > 2 else list(SERVERS)
    for server in servers:
        results = {}
        # Alternating runs, so a machine that gets busier favours neither side.
        for _ in range(2):
            for mode in ("off", "on"):
                results.setdefault(mode, []).extend(anyio.run(run, mode, rounds, server))
        for mode in ("off", "on"):
            xs = sorted(results[mode])
            print(f"{server}: sandbox {mode:3}: activate median {statistics.median(xs):.1f} ms, "
                  f"p90 {xs[int(len(xs) * 0.9)]:.1f} ms ({len(xs)} starts)")
        added = statistics.median(results["on"]) - statistics.median(results["off"])
        print(f"{server}: added by the sandbox (median): {added:.1f} ms")

if __name__ == "__main__":
    main()
