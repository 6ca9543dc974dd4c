"""Drives an installed agent-discover as an MCP client, with the official Python SDK (scripts/dist-test.sh runs it
with .ci/cache/venv's Python): initialize, tools/list (the `registry` tool is there), and a `registry` call (`list`).
Prints one JSON line: the transport, the negotiated version and how long the first `initialize` took from launch.

    dist_client.py stdio COMMAND [ARG...]      a client config's "command" and "args", as an MCP client runs them
    dist_client.py http URL TOKEN              Streamable HTTP with a bearer token

The environment (data dir, registry addresses) is passed on to the stdio command as it is.
"""

import asyncio
import json
import os
import sys
import time

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def payload(result):
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def exercise(read, write, started, transport):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        first = time.monotonic() - started
        assert init.server_info.name == "agent-discover", init.server_info
        tools = [t.name for t in (await session.list_tools()).tools]
        assert "registry" in tools, tools
        listed = await session.call_tool("registry", {"action": "list"})
        assert not listed.is_error, payload(listed)
        servers = payload(listed)
        assert isinstance(servers, list), servers
        print(json.dumps({
            "transport": transport,
            "protocol": init.protocol_version,
            "server": f"{init.server_info.name} {init.server_info.version}",
            "tools": tools,
            "servers": len(servers),
            "first_initialize_s": round(first, 3),
        }))


async def main(argv):
    started = time.monotonic()
    if argv[0] == "stdio":
        params = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            await exercise(read, write, started, "stdio")
    elif argv[0] == "http":
        url, token = argv[1], argv[2]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                await exercise(streams[0], streams[1], started, "http")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
