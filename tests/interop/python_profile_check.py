# Profiles with the official MCP Python SDK: `agent-discover mcp --profile dev` over stdio lists, finds and calls only
# the profile's tools (all of `alpha`, and `beta__echo` through a glob; `gamma` is outside), in both protocol eras.
# Usage: python python_profile_check.py BIN DATA_DIR MODE (the data dir prepared by tests/it/profiles.rs; MODE "auto"
# negotiates 2026-07-28, "legacy" 2025-11-25). Exits non-zero with a message on any failure.
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


def payload(result):
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


def inside(name: str) -> bool:
    return name.startswith("alpha__") or name == "beta__echo"


async def main(bin_path: str, data_dir: str, mode: str) -> None:
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off")
    params = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp", "--profile", "dev"], env=env)
    async with Client(params, mode=mode, raise_exceptions=True) as client:
        version = client.protocol_version
        if mode == "auto":
            assert version == "2026-07-28", version
        tools = [t.name for t in (await client.list_tools()).tools]
        proxied = [t for t in tools if "__" in t]
        assert "alpha__add" in proxied and "beta__echo" in proxied, tools
        assert all(inside(t) for t in proxied), tools
        found = payload(await client.call_tool("registry", {"action": "find_tool", "query": "add two numbers",
                                                            "auto_activate": False}))
        names = [found.get("call_as")] + [m["call_as"] for m in found.get("other_matches", [])]
        assert found.get("call_as") == "alpha__add", found
        assert all(inside(n) for n in names), found
        r = await client.call_tool("gamma__add", {"a": 1, "b": 2})
        assert r.is_error and payload(r)["kind"] == "outside_profile", payload(r)
        r = await client.call_tool("registry", {"action": "proxy_call", "call_as": "beta__add",
                                                "arguments": {"a": 1, "b": 2}})
        assert r.is_error and payload(r)["kind"] == "outside_profile", payload(r)
        r = await client.call_tool("alpha__add", {"a": 2, "b": 3})
        assert not r.is_error and "5" in str(payload(r)), payload(r)
        uris = [str(x.uri) for x in (await client.list_resources()).resources]
        assert not any(u.startswith("agent-discover://gamma/") for u in uris), uris
        print(f"ok: profile dev through the python SDK ({mode}) negotiated {version}")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    except Exception as e:  # report the failure as one line and a non-zero exit
        import traceback; traceback.print_exc()
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
