#!/usr/bin/env bash
# Installs every artefact scripts/dist.sh built (dist/) into a fresh prefix on this machine and drives each as an MCP
# client with the official Python SDK (scripts/dist_client.py: initialize, tools/list, a `registry` call), from the
# client configs users will write: the tarball's binary; the wheel with pip, pipx and `uvx agent-discover mcp`; the
# npm packages from a local registry with `npm install -g` and `npx -y agent-discover mcp`; the container image with
# podman (`serve`: /health, its health check, MCP through the published port); the Helm chart (lint, render, schema
# validation); the aarch64 tarball, when dist/ has one, under qemu-user (`--version`, an MCP session over stdio).
# `--cargo-install` also installs with `cargo install --path .` and `cargo install --git` (the URL a local clone's,
# file://, so nothing leaves the machine), both with dist.sh's profile, target and features, and checks that each
# names the same version, commit and target as the tarball's binary and answers as it does.
#
# Needs scripts/test.sh's cache (.ci/cache: the Python SDK venv, uv) and a prior scripts/dist.sh. Not run by CI
# (a dist build takes minutes of both cores); CI runs the quick checks: `--version` and `health` (tests/it/dist.rs).
# Prints one JSON line per install with the time to the first answered initialize.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=$repo/.ci/cache/venv/bin/python
uvbin=$repo/.ci/cache/uv/bin
target=x86_64-unknown-linux-musl
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
cargo_install=0
[ "${1:-}" = --cargo-install ] && cargo_install=1

fail() { echo "error: $*" >&2; exit 1; }
[ -x "$py" ] && [ -x "$uvbin/uvx" ] || fail "run scripts/test.sh first (it installs the Python MCP SDK and uv into .ci/cache)"
[ -f dist/SHA256SUMS ] || fail "run scripts/dist.sh first (dist/ has no SHA256SUMS)"

work=$(mktemp -d)
registry_pid=""
container=""
cleanup() {
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
  [ -n "$container" ] && podman rm -f "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# Every install gets a data dir of its own; nothing is downloaded at run time (model off), no dashboard.
export AGENT_DISCOVER_DASHBOARD=off AGENT_DISCOVER_MODEL_SOURCE=off
drive() { # NAME COMMAND [ARG...]: an MCP client config's command and args
  local name=$1
  shift
  mkdir -p "$work/data/$name"
  AGENT_DISCOVER_DATA_DIR="$work/data/$name" "$py" scripts/dist_client.py stdio "$@" |
    sed "s/^{/{\"install\": \"$name\", /"
}

echo "== checksums" >&2
(cd dist && sha256sum --quiet -c SHA256SUMS)

echo "== tarball" >&2
mkdir "$work/tar"
tar -C "$work/tar" -xzf "dist/agent-discover-$version-$target.tar.gz"
bin="$work/tar/agent-discover-$version-$target/agent-discover"
for f in README.md LICENSE; do [ -f "$(dirname "$bin")/$f" ] || fail "the tarball has no $f"; done
readelf -l "$bin" | grep -q INTERP && fail "$bin is dynamically linked"
"$bin" --version | grep -q "^agent-discover $version (commit [0-9a-f]\{12\}\(-dirty\)\?, $target)$" ||
  fail "--version: $("$bin" --version)"
drive tarball "$bin" mcp

echo "== wheel: pip" >&2
python3 -m venv "$work/pip"
"$work/pip/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links dist agent-discover
drive pip "$work/pip/bin/agent-discover" mcp

echo "== wheel: pipx" >&2
tools=$repo/target/dist-tools/venv
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
[ -x "$tools/bin/pipx" ] || "$tools/bin/pip" install --quiet --disable-pip-version-check pipx
# Only the package comes from dist/ (pipx's own shared pip comes from pip's configured index).
PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx/bin" "$tools/bin/pipx" upgrade-shared --quiet >/dev/null 2>&1
PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx/bin" \
  "$tools/bin/pipx" install --quiet --pip-args="--no-index --find-links $repo/dist" agent-discover >/dev/null
drive pipx "$work/pipx/bin/agent-discover" mcp

echo "== wheel: uvx agent-discover mcp (fresh uv cache)" >&2
printf 'no-index = true\nfind-links = ["%s"]\n' "$repo/dist" > "$work/uv.toml"
PATH="$uvbin:$PATH" UV_CONFIG_FILE="$work/uv.toml" UV_CACHE_DIR="$work/uv-cache" UV_TOOL_DIR="$work/uv-tools" \
  UV_PYTHON_DOWNLOADS=never drive uvx uvx agent-discover mcp

echo "== npm: a local registry, npm install -g and npx -y agent-discover mcp (fresh caches)" >&2
mkfifo "$work/registry.out"
"$py" scripts/npm_registry.py dist/npm > "$work/registry.out" &
registry_pid=$!
read -r registry < "$work/registry.out"
export npm_config_registry=$registry npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
npm_config_cache="$work/npm-cache" npm install --silent -g --prefix "$work/npm-global" agent-discover
[ -x "$work/npm-global/lib/node_modules/agent-discover/node_modules/@agent-discover/linux-x64/bin/agent-discover" ] ||
  [ -x "$work/npm-global/lib/node_modules/@agent-discover/linux-x64/bin/agent-discover" ] ||
  fail "npm did not install the platform package @agent-discover/linux-x64"
drive npm-global "$work/npm-global/bin/agent-discover" mcp
npm_config_cache="$work/npx-cache" drive npx npx -y agent-discover mcp
unset npm_config_registry

echo "== container image: podman" >&2
command -v podman >/dev/null || fail "podman is missing: apt-get install podman"
# crun refuses a host with hybrid cgroups (v1 controllers beside v2; this machine kind's VM): runc handles them.
# Limits are given explicitly: podman's default open-file limit is above what such a VM lets root raise it to.
podman=(podman)
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  command -v runc >/dev/null || fail "a host without pure cgroup v2 needs runc: apt-get install runc"
  podman=(podman --runtime runc)
fi
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
podman load --quiet -i "dist/agent-discover-$version-image.tar" >/dev/null
image="localhost/agent-discover:$version"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
container="agent-discover-dist-test-$$"
"${podman[@]}" run -d --name "$container" "${limits[@]}" -p "127.0.0.1:$port:3424" "$image" >/dev/null
# `serve` prints its new token once on stderr; the container's log has it.
token=""
for _ in $(seq 100); do
  token=$(podman logs "$container" 2>&1 | sed -n 's/^dashboard token (shown once[^)]*): \([0-9a-f]*\)$/\1/p')
  [ -n "$token" ] && curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.2
done
[ -n "$token" ] || fail "the container printed no token: $(podman logs "$container" 2>&1 | tail -5)"
curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/health" | grep -q '"status"' ||
  fail "/health through the published port"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 401 ] ||
  fail "/health without the token must be refused beyond loopback"
"${podman[@]}" healthcheck run "$container" || fail "the image's health check failed"
[ "$(podman inspect -f '{{.Config.User}}' "$container")" = 10001:10001 ] || fail "the container does not run as 10001"
"$py" scripts/dist_client.py http "http://127.0.0.1:$port/mcp" "$token" | sed 's/^{/{"install": "container", /'
podman rm -f "$container" >/dev/null
container=""

echo "== Helm chart" >&2
"$tools/bin/pip" install --quiet --disable-pip-version-check helm-python-sdk kubernetes-validate pyyaml
"$tools/bin/python" scripts/chart_check.py charts/agent-discover >&2

echo "== aarch64 tarball under qemu-user" >&2
arm=aarch64-unknown-linux-musl
if [ -f "dist/agent-discover-$version-$arm.tar.gz" ]; then
  command -v qemu-aarch64-static >/dev/null || fail "the aarch64 binary is run under qemu: apt-get install qemu-user-static"
  mkdir "$work/arm"
  tar -C "$work/arm" -xzf "dist/agent-discover-$version-$arm.tar.gz"
  armbin="$work/arm/agent-discover-$version-$arm/agent-discover"
  file -b "$armbin" | grep -q 'ARM aarch64.*statically linked' || fail "$armbin: $(file -b "$armbin")"
  qemu-aarch64-static "$armbin" --version | grep -q "^agent-discover $version (commit [0-9a-f]\{12\}\(-dirty\)\?, $arm)$" ||
    fail "aarch64 --version: $(qemu-aarch64-static "$armbin" --version)"
  drive aarch64-qemu qemu-aarch64-static "$armbin" mcp
else
  echo "dist/ has no aarch64 tarball (scripts/dist.sh x86_64-unknown-linux-musl aarch64-unknown-linux-musl builds it)" >&2
fi

if [ "$cargo_install" = 1 ]; then
  # dist.sh's binary names itself; an installed one must name the same version, commit and target.
  same_build() { # NAME BINARY
    local want got
    want=$("$bin" --version | sed 's/-dirty//')
    got=$("$2" --version | sed 's/-dirty//')
    [ "$got" = "$want" ] || fail "$1 built '$got', dist.sh built '$want'"
  }
  install_args=(--locked --profile dist --target "$target" --features mimalloc --target-dir "$repo/target")
  echo "== cargo install --path ." >&2
  # With dist.sh's commit stamp, cargo finds dist.sh's build fresh in target/: the installed binary is the same file.
  AGENT_DISCOVER_COMMIT=$("$bin" --version | sed -n 's/.*(commit \([^,]*\),.*/\1/p') \
    cargo install --quiet "${install_args[@]}" --path . --root "$work/cargo-path"
  same_build "cargo install --path" "$work/cargo-path/bin/agent-discover"
  strip -o "$work/cargo-path/stripped" "$work/cargo-path/bin/agent-discover"
  cmp -s "$work/cargo-path/stripped" "$bin" && echo "cargo install --path: the same file as dist.sh's binary" >&2 ||
    echo "cargo install --path: built again (the checkout changed since dist.sh), same version, commit and target" >&2
  drive cargo-install-path "$work/cargo-path/bin/agent-discover" mcp
  echo "== cargo install --git file://<a clone>" >&2
  # The committed state only: a bare clone, installed at this checkout's commit.
  git clone --quiet --bare "$repo" "$work/clone.git"
  AGENT_DISCOVER_COMMIT='' cargo install --quiet "${install_args[@]}" --git "file://$work/clone.git" \
    --rev "$(git rev-parse HEAD)" --root "$work/cargo-git" agent-discover
  same_build "cargo install --git" "$work/cargo-git/bin/agent-discover"
  drive cargo-install-git "$work/cargo-git/bin/agent-discover" mcp
fi
echo "every artefact installed and answered" >&2
