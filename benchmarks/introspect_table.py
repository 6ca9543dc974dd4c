#!/usr/bin/env python3
"""Summarizes introspection benchmark results (issue 14): category x count in pass 1 and after pass 2, the
enumerated share of installed packages and of those that are not libraries, stage medians, processes left, and
the same shares on the studied and held-out parts of the list.
Usage: benchmarks/introspect_table.py RESULTS.jsonl [STUDIED_LIST]"""
import collections
import json
import statistics
import sys

records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
studied = set()
if len(sys.argv) > 2:
    for line in open(sys.argv[2]):
        line = line.strip()
        if line and not line.startswith("#"):
            studied.add(line if ":" in line else "npm:" + line)

OK = ("ok", "ok_zero_tools")


def first(r):
    return r["first_pass"]["category"] if r.get("first_pass") else r["category"]


def shares(rs, label):
    inst = [r for r in rs if r["category"] != "install_failed"]
    prog = [r for r in inst if not r.get("library")]
    ok1 = sum(first(r) in OK for r in inst)
    ok2 = sum(r["category"] in OK for r in inst)
    pct = lambda a, b: f"{100 * a / b:.0f}%" if b else "-"
    print(f"{label}: {len(rs)} packages, {len(inst)} installed, {len(inst) - len(prog)} libraries; "
          f"enumerated pass 1 {ok1}/{len(inst)} ({pct(ok1, len(inst))}), after pass 2 {ok2}/{len(inst)} "
          f"({pct(ok2, len(inst))}); libraries excluded {ok2}/{len(prog)} ({pct(ok2, len(prog))})")


for eco in ("npm", "pypi"):
    rs = [r for r in records if r["ecosystem"] == eco]
    if not rs:
        continue
    c1 = collections.Counter(first(r) for r in rs)
    c2 = collections.Counter(r["category"] for r in rs)
    print(f"## {eco}\n| category | pass 1 | after pass 2 |\n|---|---|---|")
    for c in sorted(set(c1) | set(c2), key=lambda c: (-c2[c], c)):
        print(f"| {c} | {c1[c]} | {c2[c]} |")
    shares(rs, eco)
    if studied and any(r["key"] in studied for r in rs):
        shares([r for r in rs if r["key"] in studied], "  studied")
        shares([r for r in rs if r["key"] not in studied], "  held-out")
    runtimes = collections.Counter(
        f'{r["runtime"]["kind"]} {r["runtime"]["source"]}' for r in rs if r.get("runtime"))
    print("runtime:", dict(runtimes), "formats:",
          sum(any("placeholder formats" in f for f in r.get("flags", [])) for r in rs))
    rescued = collections.Counter("+".join(r["rescued_by"]) for r in rs if r.get("rescued_by"))
    print("rescued_by:", dict(rescued))
    print("tools:", sum(len(r["tools"]) for r in rs), "left_behind:", sum(r["left_behind"] for r in rs))
    for st in ("select", "install", "initialize", "tools/list", "help", "teardown"):
        ms = [s["ms"] for r in rs for s in r["stages"] if s["stage"] == st]
        if ms:
            print(f"  {st}: n {len(ms)}, median {statistics.median(ms) / 1000:.1f} s, max {max(ms) / 1000:.1f} s")
    for r in sorted(rs, key=lambda r: r["category"]):
        if r["category"] not in OK:
            print(f"  {r['category']:18} {r['package']:45} {r['evidence'][:150]}")
