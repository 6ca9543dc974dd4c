#!/usr/bin/env bash
# Compile-checks agent-discover for Windows (x86_64-pc-windows-gnu): every crate's library and binaries. Adds the Rust
# target and Debian's MinGW cross compiler (for the C dependencies' build scripts) when missing. Nothing is linked or
# run. Uses its own target directory under target/, removed afterwards unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64-posix >/dev/null
  else
    echo "error: the Windows check needs MinGW: run 'sudo apt-get install gcc-mingw-w64-x86-64-posix'" >&2
    exit 1
  fi
fi
status=0
cargo check --target "$target" --workspace || status=$?
[ "${KEEP:-0}" = 1 ] || rm -rf "target/$target"
exit "$status"
