#!/usr/bin/env bash
# Runs one introspection benchmark of issue 14: `agent-discover introspect --file LIST` at the default concurrency
# (cores + 1), `nice -n 10`, with its own empty npm, pip and uv caches, and records the whole-run time, the load
# average every 15 s and the processes left afterwards (any process whose working directory or command line is
# inside the run's folder).
# Usage: benchmarks/introspect-run.sh OUT_DIR LIST [AGENT_DISCOVER_BINARY]
# Writes OUT_DIR/results.jsonl, OUT_DIR/stderr.txt, OUT_DIR/time.txt, OUT_DIR/load.txt, OUT_DIR/left.txt.
# uv is used for PyPI installs when on PATH (scripts/install-uv.sh installs it).
set -uo pipefail
out="$1"; list="$2"; bin="${3:-target/release/agent-discover}"
rm -rf "$out"; mkdir -p "$out"
out="$(cd "$out" && pwd)"
export npm_config_cache="$out/npm-cache" PIP_CACHE_DIR="$out/pip-cache" UV_CACHE_DIR="$out/uv-cache"
( while :; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; sleep 15; done ) &
sampler=$!
start=$(date +%s)
nice -n 10 "$bin" --data-dir "$out/data" introspect --file "$list" --json > "$out/results.jsonl" 2> "$out/stderr.txt"
status=$?
echo "exit $status seconds $(( $(date +%s) - start ))" > "$out/time.txt"
kill "$sampler"
: > "$out/left.txt"
for p in /proc/[0-9]*; do
  cwd="$(readlink "$p/cwd" 2>/dev/null)" || continue
  cmd="$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)"
  case "$cwd $cmd" in *"$out/data"*) echo "${p#/proc/} $cwd $cmd" >> "$out/left.txt" ;; esac
done
cat "$out/time.txt"; echo "processes left: $(wc -l < "$out/left.txt")"
