#!/usr/bin/env bash
# Compile-checks agent-discover for macOS (aarch64-apple-darwin, x86_64-apple-darwin; default: both) from this Linux
# machine: `cargo check --workspace` (every crate's library and binaries) with zig (PyPI's `ziglang`, through
# `cargo-zigbuild`) as the C compiler of the C dependencies' build scripts (SQLite, aws-lc, QuickJS): zig carries
# macOS's libc headers, so no Apple SDK is needed to compile them. Nothing is linked or run (linking needs Apple's SDK
# and its frameworks). Uses its own target directory under target/, removed afterwards unless KEEP=1.
#
#   scripts/check-macos.sh [aarch64-apple-darwin] [x86_64-apple-darwin]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(aarch64-apple-darwin x86_64-apple-darwin)
tools="$PWD/target/dist-tools"
[ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv"
[ -x "$tools/venv/bin/cargo-zigbuild" ] ||
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check ziglang cargo-zigbuild
status=0
for target in "${targets[@]}"; do
  case "$target" in
    aarch64-apple-darwin | x86_64-apple-darwin) ;;
    *) echo "error: unknown target '$target' (aarch64-apple-darwin, x86_64-apple-darwin)" >&2; exit 1 ;;
  esac
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  echo "== cargo check --target $target" >&2
  PATH="$tools/venv/bin:$PATH" cargo-zigbuild check --locked --target "$target" --workspace ||
    status=$?
  [ "${KEEP:-0}" = 1 ] || rm -rf "target/$target"
done
exit "$status"
