# Instructions per proxied call (a benchmark, not a test; callgrind counts are the same on a busy or a quiet machine).
# Runs `agent-discover mcp` (or, with --null, the proxy bench's minimal rmcp proxy) under valgrind's callgrind, drives
# N `echo` calls through it with the official MCP Python SDK, and prints instructions per call: the total of a run
# with N calls minus that of a run with none.
#
# Usage (after `cargo build --release -p agent-discover -p ad-fixture` and `scripts/test.sh`, which installs the SDK
# into .ci/cache/venv):
#   .ci/cache/venv/bin/python benches/callgrind_proxy.py [N] [--null BENCH_EXECUTABLE] [--policies FILE]
#       [--limits] [--via-registry [--page-bytes N]]
# --policies FILE puts a Cedar policy file in the data dir's policy directory; --limits sets a server and a tool rate
# on the test server (`registry limits`, 1000000/s each: never refusing); --via-registry calls through the `registry`
# tool's `proxy_call` instead of `fx__echo` (with --page-bytes, its `page_bytes` argument too, which the fast lane
# leaves to the normal path). Then `callgrind_annotate --inclusive=yes target/callgrind-proxy-N.out` shows where they go.
import os
import re
import subprocess
import sys
import tempfile

import anyio
from mcp import Client, StdioServerParameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# AGENT_DISCOVER_BIN: another build to measure (say a copy of an earlier one, for a before/after comparison).
BIN = os.environ.get("AGENT_DISCOVER_BIN") or os.path.join(ROOT, "target", "release", "agent-discover")
# AGENT_DISCOVER_FIXTURE: the test MCP server whose `echo` is called (package ad-fixture; default: the release build).
FIXTURE = os.environ.get("AGENT_DISCOVER_FIXTURE") or os.path.join(ROOT, "target", "release", "agent-discover-fixture")


async def run(calls: int, null: str | None, policies: str | None = None, limits: bool = False,
              via_registry: bool = False, page_bytes: int | None = None) -> int:
    out = os.path.join(ROOT, "target", f"callgrind-{'null' if null else 'proxy'}-{calls}.out")
    data = tempfile.mkdtemp()
    if policies:
        os.makedirs(os.path.join(data, "policies"))
        with open(policies) as src, open(os.path.join(data, "policies", "set.cedar"), "w") as dst:
            dst.write(src.read())
    target = [null, "null-proxy", FIXTURE] if null else [BIN, "--data-dir", data, "mcp"]
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_EMBEDDING_PROVIDER="none")
    params = StdioServerParameters(
        command="valgrind",
        args=["-q", "--tool=callgrind", f"--callgrind-out-file={out}", *target],
        env=env,
    )
    async with Client(params, mode="legacy", raise_exceptions=True) as client:
        tool = "echo"
        if not null:
            for args in ({"action": "install", "name": "fx", "command": FIXTURE, "args": []},
                         {"action": "activate", "name": "fx"}):
                r = await client.call_tool("registry", args)
                assert not r.is_error, r
            if limits:
                r = await client.call_tool("registry", {"action": "limits", "name": "fx", "rate": "1000000/s",
                                                        "tool_rate": "1000000/s"})
                assert not r.is_error, r
            tool = "fx__echo"
        for _ in range(calls):
            if via_registry:
                call = {"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "ping"}}
                if page_bytes is not None:
                    call["page_bytes"] = page_bytes
                r = await client.call_tool("registry", call)
                assert not r.is_error and "ping" in r.content[0].text, r
            else:
                r = await client.call_tool(tool, {"text": "ping"})
                assert not r.is_error and r.content[0].text == "ping", r
    # valgrind writes the profile when the process exits after stdin closes.
    totals = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", totals).group(1).replace(",", ""))


def main() -> None:
    if not os.path.isfile(FIXTURE):
        sys.exit(f"{FIXTURE} is missing: run `cargo build --release -p ad-fixture` first "
                 "(or set AGENT_DISCOVER_FIXTURE)")
    args = sys.argv[1:]
    null = None
    if "--null" in args:
        i = args.index("--null")
        null = args[i + 1]
        del args[i:i + 2]
    policies = None
    if "--policies" in args:
        i = args.index("--policies")
        policies = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    page_bytes = None
    if "--page-bytes" in args:
        i = args.index("--page-bytes")
        page_bytes = int(args[i + 1])
        del args[i:i + 2]
    limits = "--limits" in args
    via_registry = "--via-registry" in args
    args = [a for a in args if a not in ("--limits", "--via-registry")]
    calls = int(args[0]) if args else 2000
    base = anyio.run(run, 0, null, policies, limits, via_registry, page_bytes)
    total = anyio.run(run, calls, null, policies, limits, via_registry, page_bytes)
    print(f"{'minimal rmcp proxy' if null else 'agent-discover'}: {(total - base) / calls:,.0f} instructions per "
          f"proxied call ({calls} calls)")


if __name__ == "__main__":
    main()
