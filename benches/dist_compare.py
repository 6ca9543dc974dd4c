# Release builds side by side (a benchmark, not a test): for each agent-discover binary given, `serve` on a fresh data
# dir with the test fixture registered and active, then
#   - memory: serve's VmRSS idle, at its peak while 8 Streamable HTTP sessions (the official Python SDK) each relay
#     CALLS `fx__echo` calls at once, and after them;
#   - per-call wall time of a relayed call from those sessions (median over all calls, client included);
#   - find_tool latency over one stdio `mcp` session (p50 / p90 of 40 queries after one warm-up; BM25 only unless
#     AGENT_DISCOVER_MODEL_DIR names the local model).
# Usage: AGENT_DISCOVER_FIXTURE=<agent-discover-fixture> .ci/cache/venv/bin/python benches/dist_compare.py \
#            LABEL=BINARY [LABEL=BINARY ...] [--calls N]
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

FIXTURE = os.environ["AGENT_DISCOVER_FIXTURE"]
QUERIES = [
    "read the contents of a text file", "echo a message back", "add two numbers together",
    "list the files in a directory", "get the current time in a time zone", "search issues in a project",
    "send a notification to a channel", "fetch a web page and return markdown",
]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


async def session_calls(url, token, calls, times, setup=False):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                if setup:
                    for args in ({"action": "install", "name": "fx", "command": FIXTURE, "args": []},
                                 {"action": "activate", "name": "fx"}):
                        r = await s.call_tool("registry", args)
                        assert not r.is_error, r
                    return
                for i in range(calls):
                    t = time.perf_counter()
                    r = await s.call_tool("fx__echo", {"text": f"call {i}"})
                    times.append(time.perf_counter() - t)
                    assert not r.is_error, r


async def http_bench(binary, calls):
    d = tempfile.mkdtemp()
    env = dict(os.environ, AGENT_DISCOVER_EMBEDDING_PROVIDER="none", AGENT_DISCOVER_MODEL_SOURCE="off")
    p = subprocess.Popen([binary, "--data-dir", d, "serve", "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        url = p.stdout.readline().decode().strip().rstrip("/") + "/mcp"
        await session_calls(url, None, 0, [], setup=True)
        await asyncio.sleep(1.0)
        idle = rss_kb(p.pid)
        peak = [idle]
        done = asyncio.Event()

        async def sample():
            while not done.is_set():
                peak.append(rss_kb(p.pid))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        times = []
        await asyncio.gather(*(session_calls(url, None, calls, times) for _ in range(8)))
        done.set()
        await sampler
        await asyncio.sleep(1.0)
        after = rss_kb(p.pid)
        return {"idle_mb": round(idle / 1024, 1), "peak_8_sessions_mb": round(max(peak) / 1024, 1),
                "after_mb": round(after / 1024, 1), "call_ms_p50": round(1000 * statistics.median(times), 3),
                "calls": len(times)}
    finally:
        p.terminate()
        p.wait(10)


async def find_tool_bench(binary):
    d = tempfile.mkdtemp()
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_MODEL_SOURCE="off")
    if not os.environ.get("AGENT_DISCOVER_MODEL_DIR"):
        env["AGENT_DISCOVER_EMBEDDING_PROVIDER"] = "none"
    params = StdioServerParameters(command=binary, args=["--data-dir", d, "mcp"], env=env)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for args in ({"action": "install", "name": "fx", "command": FIXTURE, "args": []},
                         {"action": "activate", "name": "fx"}):
                assert not (await s.call_tool("registry", args)).is_error
            await s.call_tool("registry", {"action": "find_tool", "query": QUERIES[0], "auto_activate": False})
            times = []
            for i in range(40):
                t = time.perf_counter()
                res = await s.call_tool("registry", {"action": "find_tool", "query": QUERIES[i % len(QUERIES)],
                                                     "auto_activate": False})
                times.append(time.perf_counter() - t)
                assert not res.is_error, res
            times.sort()
            return {"find_tool_ms_p50": round(1000 * times[len(times) // 2], 2),
                    "find_tool_ms_p90": round(1000 * times[int(len(times) * 0.9)], 2)}


async def main(argv):
    calls = 200
    if "--calls" in argv:
        i = argv.index("--calls")
        calls = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    for spec in argv:
        label, binary = spec.split("=", 1)
        out = {"build": label, "size_bytes": os.path.getsize(binary)}
        out.update(await http_bench(binary, calls))
        out.update(await find_tool_bench(binary))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
