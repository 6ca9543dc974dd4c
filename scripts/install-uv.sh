#!/usr/bin/env bash
# Installs uv (a PyPI package) into its own virtual environment through the user's pip configuration, for
# `agent-discover introspect`'s PyPI installs (issue 14): introspect uses uv when it is on PATH or named by
# AGENT_DISCOVER_UV, else `python3 -m venv` and pip (several times slower). Idempotent.
# Usage: scripts/install-uv.sh [DIR]   (default DIR: .ci/cache/uv). Prints the uv executable's path on stdout.
set -euo pipefail
dir="${1:-.ci/cache/uv}"
if [ ! -x "$dir/bin/uv" ]; then
  python3 -m venv "$dir" >&2
  "$dir/bin/pip" install --quiet --disable-pip-version-check uv >&2
fi
"$dir/bin/uv" --version >&2
echo "$(cd "$dir/bin" && pwd)/uv"
