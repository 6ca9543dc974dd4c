# Instructions per relayed call on every relay path (issue 31, part 4; a benchmark, not a test). As
# benches/callgrind_proxy.py, for each path: the proxy under valgrind's callgrind, N `echo` calls through it with the
# official MCP Python SDK, instructions per call = (total of a run with N calls - total of a run with none) / N, for
# agent-discover and for the minimal rmcp proxy doing the same hop (the proxy bench executable run as `null-proxy`
# or `null-proxy-http`).
#
# Paths: stdio (legacy client, legacy child: the fast lane), stdio-2026 (a 2026-07-28 client), child-2026 (the child
# spoken to in 2026-07-28: the fixture with `--era both`), proxy-call (the registry tool's `proxy_call`; the minimal
# proxy's hop is its plain call), http and http-2026 (`agent-discover serve`'s `/mcp`, legacy and 2026-07-28 clients).
#
# Usage (after `cargo build --release -p agent-discover -p ad-fixture` and `cargo bench --bench proxy --no-run`):
#   .ci/cache/venv/bin/python benches/callgrind_paths.py --null target/release/deps/proxy-<hash> [N] [PATH ...]
# AGENT_DISCOVER_BIN measures another build (a copy of an earlier one, for before/after in one run).
import os
import re
import signal
import subprocess
import sys
import tempfile

import anyio
from mcp import Client, StdioServerParameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AGENT_DISCOVER_BIN") or os.path.join(ROOT, "target", "release", "agent-discover")
FIXTURE = os.environ.get("AGENT_DISCOVER_FIXTURE") or os.path.join(ROOT, "target", "release", "agent-discover-fixture")
PATHS = ["stdio", "stdio-2026", "child-2026", "proxy-call", "http", "http-2026"]


def shape(path: str):
    """(client mode, over HTTP, fixture arguments, tool call) of a path."""
    mode = "2026-07-28" if path.endswith("-2026") and path != "child-2026" else "legacy"
    fixture_args = ["--era", "both"] if path == "child-2026" else []
    return mode, path.startswith("http"), fixture_args, path == "proxy-call"


def totals(out: str) -> int:
    text = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))


async def drive(client: Client, calls: int, null: bool, fixture_args: list, via_registry: bool) -> None:
    tool = "echo"
    if not null:
        for args in ({"action": "install", "name": "fx", "command": FIXTURE, "args": fixture_args},
                     {"action": "activate", "name": "fx"}):
            r = await client.call_tool("registry", args)
            assert not r.is_error, r
        tool = "fx__echo"
    for _ in range(calls):
        if via_registry and not null:
            r = await client.call_tool("registry", {"action": "proxy_call", "server": "fx", "tool": "echo",
                                                    "arguments": {"text": "ping"}})
            assert not r.is_error and "ping" in r.content[0].text, r
        else:
            r = await client.call_tool(tool, {"text": "ping"})
            assert not r.is_error and r.content[0].text == "ping", r


async def run(path: str, calls: int, null: str | None) -> int:
    mode, http, fixture_args, via_registry = shape(path)
    tag = f"{path}-{'null' if null else 'ad'}-{calls}"
    out = os.path.join(ROOT, "target", f"callgrind-{tag}.out")
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_EMBEDDING_PROVIDER="none",
               AGENT_DISCOVER_SANDBOX=os.environ.get("AGENT_DISCOVER_SANDBOX", "off"))
    if null and (path == "child-2026" or mode != "legacy"):
        # A 2026-07-28 client: the minimal proxy relays results as its child wrote them, and a legacy child's lack
        # the `resultType` such a client requires (agent-discover adds it), so its child speaks 2026-07-28 too.
        env["NULL_PROXY_CHILD_ERA"] = "2026"
        fixture_args = ["--era", "both"]
    valgrind = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if not http:
        target = [null, "null-proxy", FIXTURE, *fixture_args] if null else [BIN, "--data-dir", tempfile.mkdtemp(),
                                                                              "mcp"]
        params = StdioServerParameters(command=valgrind[0], args=[*valgrind[1:], *target], env=env)
        async with Client(params, mode=mode, raise_exceptions=True) as client:
            await drive(client, calls, bool(null), fixture_args, via_registry)
        return totals(out)
    target = [null, "null-proxy-http", FIXTURE, *fixture_args] if null else [
        BIN, "--data-dir", tempfile.mkdtemp(), "serve", "--port", "0"]
    proc = subprocess.Popen([*valgrind, *target], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        async with Client(url.rstrip("/") + "/mcp", mode=mode, raise_exceptions=True) as client:
            await drive(client, calls, bool(null), fixture_args, via_registry)
    finally:
        if null:
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    return totals(out)


def main() -> None:
    args = sys.argv[1:]
    null = None
    if "--null" in args:
        i = args.index("--null")
        null = args[i + 1]
        del args[i:i + 2]
    # --null-only: the minimal proxy alone (agent-discover's column left empty).
    null_only = "--null-only" in args
    args = [a for a in args if a != "--null-only"]
    calls = int(args.pop(0)) if args and args[0].isdigit() else 1000
    paths = args or PATHS
    print("| path | agent-discover | minimal rmcp proxy | ratio |\n|---|---|---|---|", flush=True)
    for path in paths:
        if null_only:
            base = (anyio.run(run, path, calls, null) - anyio.run(run, path, 0, null)) / calls
            print(f"| {path} | | {base:,.0f} | |", flush=True)
            continue
        ad = (anyio.run(run, path, calls, None) - anyio.run(run, path, 0, None)) / calls
        if null:
            base = (anyio.run(run, path, calls, null) - anyio.run(run, path, 0, null)) / calls
            print(f"| {path} | {ad:,.0f} | {base:,.0f} | {ad / base:.2f} |", flush=True)
        else:
            print(f"| {path} | {ad:,.0f} | | |", flush=True)


if __name__ == "__main__":
    main()
