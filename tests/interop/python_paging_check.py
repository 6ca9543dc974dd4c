# Interop check with the official MCP Python SDK: a 1 MB tool result arrives as its head and a resource link, and the
# whole is read back in pages with resources/read (offset and limit in the URI's query); a script saved with the
# registry's save_script is the tool scripts__NAME, listed and called, its schema enforced. Usage:
# python python_paging_check.py BIN FIXTURE DATA_DIR MODE (as python_proxy_check.py). Exits non-zero on any failure.
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters

LIMIT = 64 * 1024
MB = 1024 * 1024


def payload(result):
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def main(bin_path: str, fixture_path: str, data_dir: str, mode: str) -> None:
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off")
    params = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp"], env=env)
    async with Client(params, mode=mode, raise_exceptions=True) as client:
        r = await client.call_tool("registry", {"action": "install", "name": "bulk", "command": fixture_path,
                                                "args": ["--name", "bulk"]})
        assert not r.is_error, payload(r)
        r = await client.call_tool("registry", {"action": "activate", "name": "bulk"})
        assert not r.is_error, payload(r)

        r = await client.call_tool("bulk__lines", {"bytes": MB})
        assert not r.is_error, r
        assert [c.type for c in r.content] == ["text", "resource_link"], [c.type for c in r.content]
        head = r.content[0].text
        assert len(head.encode()) <= LIMIT, len(head.encode())
        link = r.content[1]
        total = link.size
        assert MB - 4 < total <= MB, total
        uri = str(link.uri)
        assert uri.startswith("agent-discover://results/"), uri

        pages, offset = [], 0
        while True:
            read = await client.read_resource(f"{uri}?offset={offset}&limit=300000")
            page = read.contents[0]
            pages.append(page.text)
            meta = page.meta or {}
            if meta.get("next_offset") is None:
                break
            offset = meta["next_offset"]
        whole = "".join(pages)
        assert len(whole.encode()) == total, (len(whole.encode()), total)
        assert whole.startswith(head)
        # The fixture's lines, in order, none lost or repeated: `line I é€😀 I*7919 mod 1000003`.
        lines = whole.split("\n")
        for i, line in enumerate(lines[:-1]):
            assert line == f"line {i:07d} é€😀 {i * 7919 % 1000003}", (i, line)

        r = await client.call_tool("registry", {
            "action": "save_script", "name": "double", "code": "return args.n * 2;",
            "description": "Doubles a number",
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
        assert not r.is_error, payload(r)
        tools = [t.name for t in (await client.list_tools()).tools]
        assert "scripts__double" in tools, tools
        r = await client.call_tool("scripts__double", {"n": 21})
        assert not r.is_error and payload(r)["result"] == 42, payload(r)
        r = await client.call_tool("scripts__double", {"n": "x"})
        assert r.is_error and payload(r)["kind"] == "invalid_arguments", payload(r)
        print(f"paged and saved scripts ok ({client.protocol_version}, {len(pages)} pages)")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
