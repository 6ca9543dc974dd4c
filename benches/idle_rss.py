# Idle footprint of `agent-discover mcp` (issue 31): spawn it on an empty data dir, answer initialize and tools/list,
# wait 1 s, print the spawn-to-initialize time and VmRSS / RssAnon / RssFile / Threads from /proc/PID/status.
# Usage: python3 benches/idle_rss.py target/release/agent-discover on|off   (the dashboard setting)
# AGENT_DISCOVER_RELEASE_STARTUP_CODE=off keeps the start-up code mapped, to compare.
import json, subprocess, sys, time, os, tempfile
bin_, dash = sys.argv[1], sys.argv[2]
d = tempfile.mkdtemp()
env = dict(os.environ, AGENT_DISCOVER_DASHBOARD=dash)
t0 = time.perf_counter()
p = subprocess.Popen([bin_, "--data-dir", d, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
def send(o):
    p.stdin.write((json.dumps(o) + "\n").encode()); p.stdin.flush()
send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}})
p.stdout.readline(); t1 = time.perf_counter()
send({"jsonrpc":"2.0","method":"notifications/initialized"})
send({"jsonrpc":"2.0","id":2,"method":"tools/list"})
p.stdout.readline()
time.sleep(1.0)
rss = [l for l in open(f"/proc/{p.pid}/status") if l.startswith(("VmRSS","RssAnon","RssFile","Threads"))]
print(f"init {1000*(t1-t0):.1f} ms", " ".join(x.split()[0]+x.split()[1] for x in rss))
p.stdin.close(); p.wait(5)
