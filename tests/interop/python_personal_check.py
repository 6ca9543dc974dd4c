# Each user's own keys with the official MCP Python SDK: a client signed in as one user (its access token as a bearer
# header) calls a tool of agent-discover's protected front and reports what came back, so the test can tell whose
# value the server ran with. Usage: python python_personal_check.py MCP_URL TOKEN TOOL ARGS_JSON
# Prints one JSON line {"text": "...", "is_error": bool}; exits non-zero with a message on any failure.
import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str, tool: str, args: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(tool, json.loads(args))
                text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    print(json.dumps({"text": text, "is_error": bool(result.is_error)}))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit("usage: python_personal_check.py MCP_URL TOKEN TOOL ARGS_JSON")
    asyncio.run(main(*sys.argv[1:]))
