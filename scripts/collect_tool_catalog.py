# Collects the real tool lists (initialize + tools/list only, no tool is ever called) of stdio MCP servers into tests/data/tool_catalog.json.
"""Usage: python collect_tool_catalog.py SPECS.json OUT.json [--timeout 60] [--logdir DIR]

SPECS.json is a list of launch specs:
  {"name": "github", "package": "@modelcontextprotocol/server-github", "registry": "npm",
   "command": "/path/node_modules/.bin/mcp-server-github", "args": [], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy"}}
"version" may be given; otherwise it is read from the installed package next to "command"
(node_modules/<package>/package.json for npm, importlib.metadata of the venv's python for pypi).
Servers that fail or time out are reported on stderr and left out.  Needs the `mcp` Python SDK.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import PaginatedRequestParams

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")


def installed_version(spec: dict) -> str:
    if spec.get("version"):
        return spec["version"]
    cmd = Path(spec["command"])
    if spec["registry"] == "npm":
        for parent in cmd.parents:  # .../node_modules/.bin/x -> .../node_modules/<package>/package.json
            pj = parent / "node_modules" / spec["package"] / "package.json"
            if pj.is_file():
                return json.loads(pj.read_text())["version"]
    elif spec["registry"] == "pypi":
        py = cmd.parent / "python"
        code = f"import importlib.metadata as m; print(m.version({spec['package']!r}))"
        return subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    raise RuntimeError(f"cannot find the installed version of {spec['package']}")


async def list_tools(spec: dict, errlog) -> list[dict]:
    params = StdioServerParameters(
        command=spec["command"], args=spec.get("args", []), env=spec.get("env") or {}, cwd=spec.get("cwd")
    )
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools, cursor = [], None
            while True:
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools += [
                    {"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                    for t in page.tools
                ]
                cursor = page.next_cursor
                if not cursor:
                    return tools


async def collect(spec: dict, timeout: float, logdir: Path) -> dict:
    with open(logdir / f"{spec['name']}.stderr.log", "w") as errlog:
        with anyio.fail_after(timeout):
            tools = await list_tools(spec, errlog)
    if not tools:
        raise RuntimeError("server listed no tools")
    return {
        "name": spec["name"],
        "package": spec["package"],
        "registry": spec["registry"],
        "version": installed_version(spec),
        "tools": tools,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs")
    ap.add_argument("out")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--logdir", default=os.environ.get("TMPDIR", "/tmp"))
    a = ap.parse_args()
    logdir = Path(a.logdir)
    logdir.mkdir(parents=True, exist_ok=True)

    servers, seen = [], set()
    for spec in json.loads(Path(a.specs).read_text()):
        key = (spec["registry"], spec["package"])
        if key in seen or spec["name"] in {s["name"] for s in servers}:
            print(f"skip duplicate {spec['name']} ({spec['package']})", file=sys.stderr)
            continue
        assert NAME_RE.match(spec["name"]), spec["name"]
        try:
            server = anyio.run(collect, spec, a.timeout, logdir)
        except BaseException as e:  # timeouts, crashes, protocol errors: leave the server out
            if isinstance(e, KeyboardInterrupt):
                raise
            while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
                e = e.exceptions[0]
            print(f"FAIL {spec['name']}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        seen.add(key)
        servers.append(server)
        print(f"ok   {server['name']:<20} {server['package']}@{server['version']}: {len(server['tools'])} tools",
              file=sys.stderr)

    Path(a.out).write_text(json.dumps({"servers": servers}, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(servers)} servers, {sum(len(s['tools']) for s in servers)} tools -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
