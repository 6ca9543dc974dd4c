"""Builds a platform wheel that carries the agent-discover binary as a script (scripts/dist.sh runs it).

A wheel is a zip: the binary under `agent_discover-VERSION.data/scripts/` (pip, pipx and uv put it on PATH as
`agent-discover`, unchanged), and `agent_discover-VERSION.dist-info/` with METADATA, WHEEL, the licence and RECORD
(each file's SHA-256). No Python code: the same layout maturin's `bin` bindings produce, without compiling again.
"""

import argparse
import base64
import hashlib
import os
import zipfile

p = argparse.ArgumentParser()
p.add_argument("--binary", required=True)
p.add_argument("--version", required=True)
p.add_argument("--platform", required=True, help="platform tag(s), dot-separated")
p.add_argument("--readme", required=True)
p.add_argument("--license", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()

dist = "agent_discover"
info = f"{dist}-{a.version}.dist-info"
data = f"{dist}-{a.version}.data"
tags = [f"py3-none-{plat}" for plat in a.platform.split(".")]

with open(a.readme, encoding="utf-8") as f:
    readme = f.read()
metadata = (
    "Metadata-Version: 2.4\n"
    "Name: agent-discover\n"
    f"Version: {a.version}\n"
    "Summary: MCP server registry, marketplace and proxy: one MCP endpoint that finds, installs, activates and "
    "calls other MCP servers on demand\n"
    "License-Expression: MIT\n"
    "License-File: LICENSE\n"
    "Requires-Python: >=3.8\n"
    "Classifier: Programming Language :: Rust\n"
    "Classifier: Operating System :: POSIX :: Linux\n"
    "Description-Content-Type: text/markdown\n"
    "\n" + readme
)
wheel = (
    "Wheel-Version: 1.0\n"
    "Generator: agent-discover scripts/dist_wheel.py\n"
    "Root-Is-Purelib: false\n" + "".join(f"Tag: {t}\n" for t in tags)
)
with open(a.binary, "rb") as f:
    binary = f.read()
with open(a.license, "rb") as f:
    license_text = f.read()

files = [
    (f"{data}/scripts/agent-discover", binary, 0o755),
    (f"{info}/METADATA", metadata.encode(), 0o644),
    (f"{info}/WHEEL", wheel.encode(), 0o644),
    (f"{info}/licenses/LICENSE", license_text, 0o644),
]


def record_line(name: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(content)}\n"


record = "".join(record_line(n, c) for n, c, _ in files) + f"{info}/RECORD,,\n"
files.append((f"{info}/RECORD", record.encode(), 0o644))

name = f"{dist}-{a.version}-py3-none-{a.platform}.whl"
path = os.path.join(a.out, name)
with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
    for n, content, mode in files:
        entry = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
        entry.external_attr = (0o100000 | mode) << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(entry, content)
print(path)
