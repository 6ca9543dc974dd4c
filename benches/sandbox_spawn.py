# What the sandbox adds to starting a child (issue 26): `activate` of the fixture server (spawn under the child guard,
# initialize, tools/list) through `agent-discover mcp`, timed by the client, with the sandbox on and off. A benchmark,
# not a test. Each round deactivates first, so every activation starts a fresh child.
#
# Usage (after `cargo build --release -p agent-discover -p ad-fixture` and scripts/test.sh, which installs the SDK):
#   .ci/cache/venv/bin/python benches/sandbox_spawn.py [ROUNDS]
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


async def run(sandbox: str, rounds: int) -> list[float]:
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_EMBEDDING_PROVIDER="none",
               AGENT_DISCOVER_SANDBOX=sandbox)
    params = StdioServerParameters(command=BIN, args=["--data-dir", tempfile.mkdtemp(), "mcp"], env=env)
    out = []
    async with Client(params, mode="legacy", raise_exceptions=True) as client:
        r = await client.call_tool("registry", {"action": "install", "name": "fx", "command": FIXTURE, "args": []})
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
    results = {}
    # Alternating runs, so a machine that gets busier favours neither side.
    for _ in range(2):
        for mode in ("off", "on"):
            results.setdefault(mode, []).extend(anyio.run(run, mode, rounds))
    for mode in ("off", "on"):
        xs = sorted(results[mode])
        print(f"sandbox {mode:3}: activate median {statistics.median(xs):.1f} ms, "
              f"p90 {xs[int(len(xs) * 0.9)]:.1f} ms ({len(xs)} starts)")
    print(f"added by the sandbox (median): {statistics.median(results['on']) - statistics.median(results['off']):.1f} ms")


if __name__ == "__main__":
    main()
