# What a network allow-list adds to one HTTP request of a confined server: the same Python MCP server (official SDK)
# fetches a local HTTP server N times with urllib (a new connection per request), once with `network: full` (straight
# to 127.0.0.1) and once with `network: hosts:bench.test` (through the namespace's bridge and agent-discover's
# filtering proxy; `bench.test` is mapped to 127.0.0.1 by AGENT_DISCOVER_SANDBOX_RESOLVE). The server times its own
# requests, so MCP and process start are not counted. A benchmark, not a test.
#
# Usage (after scripts/test.sh, which installs the SDK, and a build of agent-discover):
#   .ci/cache/venv/bin/python benches/netallow_latency.py [REQUESTS] [debug|release]
import http.server
import os
import sys
import tempfile
import threading

import anyio
from mcp import Client, StdioServerParameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = sys.argv[2] if len(sys.argv) > 2 else "release"
BIN = os.environ.get("AGENT_DISCOVER_BIN") or os.path.join(ROOT, "target", PROFILE, "agent-discover")
PYTHON = sys.executable

SERVER = r'''
import statistics, time, urllib.request
from mcp.server.mcpserver import MCPServer
mcp = MCPServer('bench')

@mcp.tool()
def bench(url: str, n: int) -> str:
    """Fetch url n times; the median and p90 in microseconds."""
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        urllib.request.urlopen(url, timeout=20).read()
        xs.append((time.perf_counter() - t) * 1e6)
    xs.sort()
    return "%.0f %.0f" % (statistics.median(xs), xs[int(len(xs) * 0.9)])

if __name__ == '__main__':
    mcp.run()
'''


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def run(port: int, n: int) -> dict:
    src = tempfile.mkdtemp()
    script = os.path.join(src, "bench_server.py")
    with open(script, "w") as f:
        f.write(SERVER)
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(AGENT_DISCOVER_DASHBOARD="off", AGENT_DISCOVER_EMBEDDING_PROVIDER="none",
               AGENT_DISCOVER_SANDBOX_RESOLVE="bench.test=127.0.0.1")
    params = StdioServerParameters(command=BIN, args=["--data-dir", tempfile.mkdtemp(), "mcp"], env=env)
    out = {}
    async with Client(params, mode="legacy", raise_exceptions=True) as client:
        for name, network, url in (
            ("full", "full", f"http://127.0.0.1:{port}/"),
            ("hosts", "hosts:bench.test", f"http://bench.test:{port}/"),
        ):
            r = await client.call_tool("registry", {"action": "install", "name": name, "command": PYTHON,
                                                    "args": [script]})
            assert not r.is_error, r
            r = await client.call_tool("registry", {"action": "sandbox", "name": name, "network": network})
            assert not r.is_error, r
            r = await client.call_tool("registry", {"action": "activate", "name": name})
            assert not r.is_error, r
            await client.call_tool(f"{name}__bench", {"url": url, "n": 20})  # warm-up
            r = await client.call_tool(f"{name}__bench", {"url": url, "n": n})
            assert not r.is_error, r
            out[name] = [float(x) for x in r.content[0].text.split()]
    return out


def main() -> None:
    if not os.path.isfile(BIN):
        sys.exit(f"{BIN} is missing: build agent-discover ({PROFILE}) first")
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    res = anyio.run(run, httpd.server_address[1], n)
    for name in ("full", "hosts"):
        med, p90 = res[name]
        print(f"network {name:5}: per request median {med:.0f} us, p90 {p90:.0f} us ({n} requests)")
    print(f"added by the allow-list: median {res['hosts'][0] - res['full'][0]:.0f} us")
    httpd.shutdown()


if __name__ == "__main__":
    main()
