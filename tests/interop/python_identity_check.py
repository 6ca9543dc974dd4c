# Interop check (issue 30) with the official MCP Python SDK's OAuth client: it connects to agent-discover's protected
# front, discovers the resource metadata and the authorization server, registers itself, runs the authorization code
# flow with PKCE (headless: the authorize URL is fetched and its redirect read instead of opening a browser), then
# lists the tools and calls one. Usage: python python_identity_check.py MCP_URL TOOL TEXT
# Prints one JSON line {"tools": [...], "result": "..."}; exits non-zero with a message on any failure.
import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

REDIRECT = "http://127.0.0.1:9/callback"


class Memory:
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


async def main(url: str, tool: str, text: str) -> None:
    answer = {}

    async def redirect_handler(authorization_url: str) -> None:
        # The test authorization server approves at once: read the code from its redirect.
        async with httpx2.AsyncClient() as http:
            resp = await http.get(authorization_url, follow_redirects=False)
        location = resp.headers.get("location")
        if resp.status_code not in (302, 303, 307) or not location or not location.startswith(REDIRECT):
            raise SystemExit(f"authorize answered {resp.status_code} {location!r}")
        query = parse_qs(urlparse(location).query)
        answer["code"] = query["code"][0]
        answer["state"] = query.get("state", [None])[0]

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=answer["code"], state=answer["state"])

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="python-identity-check",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                result = await session.call_tool(tool, {"text": text})
                out = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if "code" not in answer:
        raise SystemExit("the client never went through the authorization flow")
    print(json.dumps({"tools": tools, "result": out}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
