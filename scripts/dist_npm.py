"""Writes the npm packages of a release (scripts/dist.sh runs it, then `npm pack`).

`platform`: `@agent-discover/linux-<cpu>`, the static binary alone, restricted to its os and cpu, so npm installs
only the one that fits. `launcher`: `agent-discover`, whose `bin` is a small Node script that runs that binary; the
platform packages are its optional dependencies (the pattern esbuild and Biome use: one `npx -y agent-discover`
works on every platform, nothing downloads at install time, no install script runs).
"""

import argparse
import json
import os
import shutil

SCOPE = "@agent-discover"

LAUNCHER = r"""#!/usr/bin/env node
// Runs the agent-discover binary of this platform's package (an optional dependency npm installed for this os and
// cpu), with the same arguments, stdin, stdout and stderr; exits with its status. AGENT_DISCOVER_BINARY overrides it.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");

const platform = `${process.platform}-${process.arch}`;
const pkg = `@agent-discover/${platform}`;
let bin = process.env.AGENT_DISCOVER_BINARY;
if (!bin) {
  try {
    bin = require.resolve(`${pkg}/bin/agent-discover`);
  } catch {
    console.error(
      `agent-discover: no binary for ${platform}: the package ${pkg} is not installed. Packages are published ` +
        `for: __PLATFORMS__. npm skips optional dependencies with --omit=optional or --no-optional; ` +
        `elsewhere build from source (cargo install --git ...).`,
    );
    process.exit(1);
  }
  try {
    fs.accessSync(bin, fs.constants.X_OK);
  } catch {
    fs.chmodSync(bin, 0o755);
  }
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => {
  console.error(`agent-discover: cannot run ${bin}: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  process.exit(signal ? 128 + (os.constants.signals[signal] || 0) : code);
});
"""

p = argparse.ArgumentParser()
p.add_argument("kind", choices=["platform", "launcher"])
p.add_argument("--version", required=True)
p.add_argument("--out", required=True)
p.add_argument("--binary")
p.add_argument("--cpu")
p.add_argument("--cpus", help="space-separated cpus of the platform packages (launcher)")
p.add_argument("--readme")
p.add_argument("--license")
a = p.parse_args()

if os.path.exists(a.out):
    shutil.rmtree(a.out)
os.makedirs(os.path.join(a.out, "bin"))
common = {"version": a.version, "license": "MIT"}

if a.kind == "platform":
    manifest = dict(
        name=f"{SCOPE}/linux-{a.cpu}",
        description=f"The agent-discover binary for Linux {a.cpu} (static, musl)",
        os=["linux"],
        cpu=[a.cpu],
        files=["bin/agent-discover"],
        preferUnplugged=True,
        **common,
    )
    dest = os.path.join(a.out, "bin", "agent-discover")
    shutil.copyfile(a.binary, dest)
    os.chmod(dest, 0o755)
else:
    cpus = a.cpus.split()
    manifest = dict(
        name="agent-discover",
        description="MCP server registry, marketplace and proxy: one MCP endpoint that finds, installs, activates "
        "and calls other MCP servers on demand",
        bin={"agent-discover": "bin/agent-discover.js"},
        files=["bin/agent-discover.js", "README.md", "LICENSE"],
        optionalDependencies={f"{SCOPE}/linux-{cpu}": a.version for cpu in cpus},
        engines={"node": ">=16"},
        keywords=["mcp", "model-context-protocol", "registry", "proxy"],
        **common,
    )
    dest = os.path.join(a.out, "bin", "agent-discover.js")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(LAUNCHER.replace("__PLATFORMS__", ", ".join(f"linux-{c}" for c in cpus)))
    os.chmod(dest, 0o755)
    shutil.copyfile(a.readme, os.path.join(a.out, "README.md"))
    shutil.copyfile(a.license, os.path.join(a.out, "LICENSE"))

with open(os.path.join(a.out, "package.json"), "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
