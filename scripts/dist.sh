#!/usr/bin/env bash
# Builds every release artefact into dist/ (gitignored); publishes nothing.
#
#   scripts/dist.sh [--no-image] [TARGET...]     TARGET: x86_64-unknown-linux-musl (default), aarch64-unknown-linux-musl
#
# Per target: a static binary (musl, `dist` profile: fat LTO, one codegen unit, optimised for size except the call
# path's crates; mimalloc as the allocator; the dashboard is compiled in), stripped; a tarball with the binary,
# README.md and LICENSE; a Python wheel carrying the binary (pip, pipx, uvx); an npm package carrying the binary (an
# optional dependency of the `agent-discover` launcher package, as esbuild and Biome do it). Then the launcher
# package, SHA256SUMS over everything, and (unless --no-image) the container image from Containerfile as an OCI
# archive. scripts/dist-test.sh installs and drives them.
#
# The binary of a target is built once and reused by every packaging step. x86_64 needs Debian's musl-tools (the C
# parts: SQLite, aws-lc, mimalloc); aarch64 is cross-compiled with zig as the C compiler and linker (PyPI's ziglang
# and cargo-zigbuild, installed into target/dist-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

image=1
targets=()
for a in "$@"; do
  case "$a" in
    --no-image) image=0 ;;
    x86_64-unknown-linux-musl | aarch64-unknown-linux-musl) targets+=("$a") ;;
    *) echo "error: unknown argument '$a' (targets: x86_64-unknown-linux-musl, aarch64-unknown-linux-musl)" >&2; exit 1 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-musl)

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
# The commit `--version` names: AGENT_DISCOVER_COMMIT when set (a build from a source tarball), else the checkout's
# (`-dirty` with uncommitted changes).
commit=${AGENT_DISCOVER_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
if [ -z "${AGENT_DISCOVER_COMMIT:-}" ] && [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit="$commit-dirty"
fi
export AGENT_DISCOVER_COMMIT="$commit"
tools="$PWD/target/dist-tools"
mkdir -p dist "$tools"

root() { [ "$(id -u)" = 0 ] || { echo "error: $1 is missing: run 'sudo apt-get install $2'" >&2; exit 1; }; }
apt_install() { # PROGRAM PACKAGE...
  command -v "$1" >/dev/null && return
  root "$1" "${*:2}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${@:2}" >/dev/null
}

# PyPI tools in a venv of their own (addresses from pip's own configuration).
pytools() {
  [ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "$@"
}

build() { # TARGET -> path of the stripped binary in dist/
  local target=$1 out
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  case "$target" in
    x86_64-unknown-linux-musl)
      apt_install musl-gcc musl-tools
      nice -n 15 cargo build --locked --profile dist --target "$target" --features mimalloc \
        -p agent-discover --bin agent-discover >&2
      strip_cmd=strip
      ;;
    aarch64-unknown-linux-musl)
      [ -x "$tools/venv/bin/cargo-zigbuild" ] || pytools ziglang cargo-zigbuild
      apt_install aarch64-linux-gnu-strip binutils-aarch64-linux-gnu
      PATH="$tools/venv/bin:$PATH" nice -n 15 cargo zigbuild --locked --profile dist --target "$target" \
        --features mimalloc -p agent-discover --bin agent-discover >&2
      strip_cmd=aarch64-linux-gnu-strip
      ;;
  esac
  out="dist/bin/$target/agent-discover"
  mkdir -p "dist/bin/$target"
  cp "target/$target/dist/agent-discover" "$out"
  "$strip_cmd" "$out"
  echo "$out"
}

# Short platform names: the wheel's platform tag and the npm package's os/cpu.
wheel_platform() {
  case "$1" in
    x86_64-*) echo manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64 ;;
    aarch64-*) echo manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64 ;;
  esac
}
npm_cpu() { case "$1" in x86_64-*) echo x64 ;; aarch64-*) echo arm64 ;; esac; }

rm -rf dist/npm dist/*.tar.gz dist/*.whl dist/SHA256SUMS
mkdir -p dist/npm
npm_platforms=()
for target in "${targets[@]}"; do
  bin=$(build "$target")
  if [ "$target" = x86_64-unknown-linux-musl ]; then
    # The build is the one to ship only if it runs here and names itself.
    "$bin" --version | grep -q "$version (commit $commit, $target)" || {
      echo "error: $bin --version does not name $version, $commit and $target" >&2; exit 1; }
  fi
  printf '%s\t%s bytes (stripped)\n' "$target" "$(stat -c %s "$bin")" >&2

  # Tarball: one directory with the binary, README and licence.
  name="agent-discover-$version-$target"
  stage=$(mktemp -d)
  mkdir "$stage/$name"
  cp "$bin" README.md LICENSE "$stage/$name/"
  tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "dist/$name.tar.gz" "$name"
  rm -rf "$stage"

  # Python wheel with the binary as a script (what maturin's `bin` bindings produce).
  python3 scripts/dist_wheel.py --binary "$bin" --version "$version" --platform "$(wheel_platform "$target")" \
    --readme README.md --license LICENSE --out dist

  # npm binary package for this platform.
  cpu=$(npm_cpu "$target")
  python3 scripts/dist_npm.py platform --binary "$bin" --version "$version" --cpu "$cpu" --out dist/npm/linux-$cpu
  (cd dist/npm && npm pack --silent "./linux-$cpu" >/dev/null)
  npm_platforms+=("$cpu")
done

# The npm launcher package: `agent-discover` on PATH runs the binary of the installed platform package.
python3 scripts/dist_npm.py launcher --version "$version" --cpus "${npm_platforms[*]}" --readme README.md \
  --license LICENSE --out dist/npm/agent-discover
(cd dist/npm && npm pack --silent ./agent-discover >/dev/null)

if [ "$image" = 1 ]; then
  apt_install podman podman
  stage=dist/image
  rm -rf "$stage" && mkdir -p "$stage"
  cp dist/bin/x86_64-unknown-linux-musl/agent-discover "$stage/"
  # The CA roots remote servers, OAuth and the marketplace are checked against (the image has no package manager).
  cp /etc/ssl/certs/ca-certificates.crt "$stage/"
  mkdir -p "$stage/data/tmp"
  printf 'agent-discover:x:10001:10001::/data:/nonexistent\n' > "$stage/passwd"
  podman build --quiet --format docker -f Containerfile -t "localhost/agent-discover:$version" "$stage" >&2
  rm -f "dist/agent-discover-$version-image.tar"
  podman save --quiet --format docker-archive -o "dist/agent-discover-$version-image.tar" "localhost/agent-discover:$version"
fi

(cd dist && sha256sum -- *.tar.gz *.whl npm/*.tgz $( [ "$image" = 1 ] && echo ./*-image.tar ) > SHA256SUMS)
echo "dist/ (commit $commit):" >&2
(cd dist && ls -l -- *.tar.gz *.whl npm/*.tgz SHA256SUMS $( [ "$image" = 1 ] && echo ./*-image.tar )) >&2
