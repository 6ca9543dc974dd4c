# A profile's own tool override with the official MCP Python SDK: through `agent-discover mcp --profile dev` the
# fixture's `shout` is `ov__say` (its `mode` fixed to "loud": gone from the schema, injected on the call), while the
# aggregated `agent-discover mcp` still shows `ov__shout` as the server does.
# Usage: python python_profile_override_check.py BIN DATA_DIR (the data dir prepared by tests/it/profile_overrides.rs).
# Exits non-zero with a message on any failure.
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(bin_path: str, data_dir: str) -> None:
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off")
    profile = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp", "--profile", "dev"], env=env)
    async with Client(profile, raise_exceptions=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "ov__say" in tools and "ov__shout" not in tools, list(tools)
        props = tools["ov__say"].input_schema.get("properties", {})
        assert "mode" not in props and "text" in props, props
        r = await client.call_tool("ov__say", {"text": "from python"})
        out = text(r)
        assert not r.is_error and out.startswith("called shout with "), out
        args = json.loads(out[len("called shout with "):])
        assert args == {"text": "from python", "mode": "loud"}, args
    aggregated = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp"], env=env)
    async with Client(aggregated, raise_exceptions=True) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "ov__shout" in names and "ov__say" not in names, names
    print("ok: profile override through the python SDK")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except Exception as e:  # report the failure as one line and a non-zero exit
        import traceback; traceback.print_exc()
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
