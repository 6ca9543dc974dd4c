"""find_tool end to end through the official MCP Python SDK, as issue 31 measures it: several `agent-discover mcp`
processes (one per entry of the JSON config on argv[1]: {"label", "bin", "dir", "provider"}) are started as stdio
servers, warmed up (the first query embeds the catalog), then sent the realistic queries (10-30 words, tests/data)
in turn, alternating the order; prints p50 / p90 latency and answer bytes per process, for ROUNDS rounds (argv[2],
default 3). Run by `benches/search.rs` (SEARCH_BENCH_REAL=1), which builds the catalogs."""

import asyncio
import json
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def queries():
    out = []
    for f in ["tool_queries_heldout.json", "tool_queries.json"]:
        with open(os.path.join(ROOT, "tests", "data", f)) as fh:
            for q in json.load(fh)["queries"]:
                if 10 <= len(q["query"].split()) <= 30:
                    out.append(q["query"])
    return out


async def one_round(config, qs, rnd):
    async with AsyncExitStack() as stack:
        sessions = []
        for c in config:
            env = dict(os.environ)
            env.update(
                {
                    "AGENT_DISCOVER_DASHBOARD": "off",
                    "AGENT_DISCOVER_MODEL_SOURCE": "off",
                    "AGENT_DISCOVER_EMBEDDING_PROVIDER": c["provider"],
                }
            )
            params = StdioServerParameters(command=c["bin"], args=["--data-dir", c["dir"], "mcp"], env=env)
            errlog = stack.enter_context(open(os.devnull, "w"))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            # The first query embeds the catalog's tools (seconds); the second takes the warm path.
            for q in ["warm up the search index", "send a message to a channel"]:
                await session.call_tool("registry", {"action": "find_tool", "query": q, "auto_activate": False})
            sessions.append(session)
        times = [[] for _ in sessions]
        sizes = [[] for _ in sessions]
        found = [0 for _ in sessions]
        for i, q in enumerate(qs):
            order = list(range(len(sessions)))
            if (i + rnd) % 2:
                order.reverse()
            for j in order:
                t = time.perf_counter()
                r = await sessions[j].call_tool(
                    "registry", {"action": "find_tool", "query": q, "auto_activate": False}
                )
                times[j].append((time.perf_counter() - t) * 1000)
                assert not r.is_error, r
                text = r.content[0].text
                sizes[j].append(len(text))
                found[j] += json.loads(text).get("found") is True
        return times, sizes, found


def main():
    config = json.loads(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    qs = queries()
    print(f"{len(qs)} queries through the Python SDK, p50 / p90 per round (answer bytes p50, answers that found a tool)")
    print("| round | " + " | ".join(c["label"] for c in config) + " |")
    print("|---|" + "---|" * len(config))
    for rnd in range(1, rounds + 1):
        times, sizes, found = asyncio.run(one_round(config, qs, rnd))
        cells = []
        for t, s, f in zip(times, sizes, found):
            t = sorted(t)
            cells.append(
                f"{statistics.median(t):.2f} / {t[len(t) * 9 // 10]:.2f} ms ({int(statistics.median(s))} B, {f} found)"
            )
        print(f"| {rnd} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
