# What reaches an agent for a 1 MB tool result with paging on (the default 64 KiB limit), through the official Python
# SDK: the head's text, the link block and the whole result as JSON. Usage: python paging_bytes.py BIN FIXTURE DATA_DIR
import json, os, sys, anyio
from mcp import Client, StdioServerParameters
async def main(bin_path, fixture, data_dir):
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off")
    params = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp"], env=env)
    async with Client(params, mode="legacy", raise_exceptions=True) as c:
        await c.call_tool("registry", {"action": "install", "name": "bulk", "command": fixture, "args": ["--name", "bulk"]})
        await c.call_tool("registry", {"action": "activate", "name": "bulk"})
        r = await c.call_tool("bulk__lines", {"bytes": 1048576})
        d = r.model_dump(mode="json", by_alias=True, exclude_none=True)
        head = r.content[0].text
        link = d["content"][1]
        print("head text bytes", len(head.encode()), "link JSON bytes", len(json.dumps(link, ensure_ascii=False).encode()),
              "result JSON bytes", len(json.dumps(d, ensure_ascii=False).encode()), "whole", r.content[1].size)
anyio.run(main, *sys.argv[1:4])
