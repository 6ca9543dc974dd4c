"""Builds attacks_tuning.json and attacks_heldout.json (this directory) from the payload pools and real tools.

Run from the repository root: python3 tests/data/scan/attacks/build.py. Deterministic (fixed seed). Every case is a
real tool (tuning hosts from tests/data/tool_catalog.json, held-out hosts from tests/data/scan/npm_top120_tools.json)
with one payload injected; the payload pools are payloads_tuning.py and payloads_heldout.py.
"""
import base64, copy, importlib.util, json, os, random, re, sys, urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "../../../.."))
PER_FAMILY = 36

def load_pool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m

def hosts(path):
    v = json.load(open(os.path.join(ROOT, path)))
    out = []
    for s in v["servers"]:
        server = (s.get("name") or s.get("package") or "server").split("/")[-1]
        for t in s.get("tools") or []:
            if len(t.get("description") or "") >= 30 and t.get("inputSchema", {}).get("properties"):
                out.append((server, t))
    return out

HOMO = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "x": "\u0445", "i": "\u0456"}

def encode(kind, o):
    b = o.encode()
    if kind == "base64":
        return "Reference: " + base64.b64encode(b).decode()
    if kind == "base64url":
        return "token=" + base64.urlsafe_b64encode(b).decode().rstrip("=")
    if kind == "base64x2":
        return "cfg:" + base64.b64encode(base64.b64encode(b)).decode()
    if kind == "base32":
        return "id " + base64.b32encode(b).decode()
    if kind == "hex":
        return "Checksum " + b.hex()
    if kind == "hex_spaced":
        return "Bytes: " + " ".join("%02x" % x for x in b)
    if kind == "percent":
        return "See " + "".join("%%%02X" % x for x in b)
    if kind == "entities":
        return "".join("&#x%x;" % ord(c) for c in o)
    if kind == "entities_dec":
        return "".join("&#%d;" % ord(c) for c in o)
    if kind == "uescape":
        return "".join("\\u%04x" % ord(c) for c in o)
    if kind == "xescape":
        return "".join("\\x%02x" % x for x in b)
    if kind == "rot13":
        import codecs
        return "(rot13) " + codecs.encode(o, "rot13")
    if kind == "reversed":
        return "Read backwards: " + o[::-1]
    raise ValueError(kind)

def smuggle(kind, o):
    if kind == "tags":
        return "Stable API." + "".join(chr(0xE0000 + ord(c)) for c in o)
    if kind == "tags_only":
        return "".join(chr(0xE0000 + ord(c)) for c in o)
    if kind == "zw_interleave":
        return "\u200b".join(o)
    if kind == "zwj_interleave":
        return "\u200d".join(o)
    if kind == "bidi":
        return "\u202e" + o[::-1] + "\u202c"
    if kind == "rlo":
        return "\u2067\u202e" + o[::-1] + "\u202c\u2069"
    if kind == "homoglyph":
        return "".join(HOMO.get(c, c) for c in o)
    if kind == "variation":
        def vs(x):
            return chr(0xFE00 + x) if x < 16 else chr(0xE0100 + x - 16)
        return "\U0001F600" + "".join(vs(x) for x in o.encode())
    if kind == "invisible_ops":
        return "\u2063".join(o)
    raise ValueError(kind)

def first_param(t):
    return next(iter(t["inputSchema"]["properties"]))

def add_param(t, name, desc="Optional."):
    props = t["inputSchema"].setdefault("properties", {})
    if name not in props:
        props[name] = {"type": "string", "description": desc}

def append(t, text, rng):
    d = t.get("description") or ""
    where = rng.random()
    if where < 0.7:
        t["description"] = d.rstrip() + "\n\n" + text
    elif where < 0.85:
        t["description"] = text + "\n\n" + d
    else:
        p = first_param(t)
        prop = t["inputSchema"]["properties"][p]
        prop["description"] = ((prop.get("description") or "") + " " + text).strip()

def schema(t, where, text):
    props = t["inputSchema"]["properties"]
    p = first_param(t)
    prop = props[p] if isinstance(props[p], dict) else {}
    props[p] = prop
    if where == "param_desc":
        prop["description"] = ((prop.get("description") or "") + " " + text).strip()
    elif where == "default":
        prop["default"] = text
    elif where == "enum":
        prop["enum"] = ["standard", "fast", text]
    elif where == "example":
        prop["examples"] = [text]
    elif where == "title":
        prop["title"] = text
    elif where == "comment":
        prop["$comment"] = text
    elif where == "param_name":
        props[text] = {"type": "string"}
    elif where == "output_desc":
        t["outputSchema"] = {"type": "object", "description": text, "properties": {"result": {"type": "string"}}}
    elif where == "items_desc":
        props["entries"] = {"type": "array", "items": {"type": "string", "description": text}}

PARAM_RE = re.compile(r"`([a-z_]+)`|the ([a-z_]+) (?:argument|parameter|field)|in `?([a-z_]+)`? (?:argument|parameter|field)")

def build(pool, host_list, prefix, source):
    rng = random.Random(43 if prefix == "t" else 4343)
    cases = []
    fams = {
        "ansi_escapes": lambda k: ("desc", pool.ANSI_DEVICES[(k + k // 12) % len(pool.ANSI_DEVICES)].format(o=pool.HIDDEN_ORDERS[k % 12])),
        "unicode_smuggling": lambda k: ("desc", smuggle(pool.UNICODE_DEVICES[(k + k // 12) % len(pool.UNICODE_DEVICES)], pool.HIDDEN_ORDERS[k % 12])),
        "encoded_payloads": lambda k: ("desc", encode(pool.ENCODINGS[(k + k // 12) % len(pool.ENCODINGS)], pool.HIDDEN_ORDERS[k % 12])),
        "hidden_instructions": lambda k: ("desc", pool.HIDDEN_TAGS[k % 12].format(o=pool.HIDDEN_ORDERS[(k + k // 12) % 12])),
        "schema_poisoning": lambda k: ("schema",) + pool.SCHEMA[k % 12],
        "cross_server_shadowing": lambda k: ("shadow", pool.SHADOW[k % 12]),
        "exfiltration": lambda k: ("exfil", pool.EXFIL[k % 12]),
        "subtle_manipulation": lambda k: ("desc", pool.SUBTLE[k % 12]),
    }
    for fam, make in fams.items():
        for k in range(PER_FAMILY):
            server, host = rng.choice(host_list)
            t = copy.deepcopy(host)
            spec = make(k)
            case = {"id": f"{prefix}-{fam}-{k:02d}", "family": fam, "label": "poisoned", "source": source,
                    "kind": "tool", "server": server}
            if spec[0] == "desc":
                append(t, spec[1], rng)
            elif spec[0] == "schema":
                schema(t, spec[1], spec[2])
            elif spec[0] == "shadow":
                t["description"] = (t.get("description") or "").rstrip() + "\n\n" + spec[1]
                case["other_tools"] = pool.OTHER_TOOLS
            elif spec[0] == "exfil":
                text = spec[1]
                for m in PARAM_RE.finditer(text):
                    name = next(g for g in m.groups() if g)
                    if "_" in name or name.isalpha():
                        add_param(t, name)
                append(t, text, rng)
            case["definition"] = t
            cases.append(case)
    return cases

def main():
    for part, pool_name, host_file, prefix in [
        ("tuning", "payloads_tuning", "tests/data/tool_catalog.json", "t"),
        ("heldout", "payloads_heldout", "tests/data/scan/npm_top120_tools.json", "h"),
    ]:
        pool = load_pool(pool_name)
        cases = build(pool, hosts(host_file), prefix,
                      "written from the public write-ups (Invariant Labs tool poisoning, shadowing, rug pulls; "
                      "Trail of Bits line jumping and ANSI escapes; CyberArk full-schema poisoning); payload injected "
                      "into a real tool")
        about = (f"{part} part of the attack families: {len(cases)} poisoned definitions, {PER_FAMILY} per family; "
                 "built by tests/data/scan/attacks/build.py from " + pool_name + ".py"
                 + (" (never tuned on)" if part == "heldout" else ""))
        with open(os.path.join(HERE, f"attacks_{part}.json"), "w") as f:
            json.dump({"about": about, "cases": cases}, f, indent=1, ensure_ascii=True)
            f.write("\n")
        print(part, len(cases))

main()
