# Instructions per relayed call by crate (a benchmark helper, not a test): from the two callgrind runs
# benches/callgrind_proxy.py leaves (target/callgrind-proxy-N.out and target/callgrind-proxy-0.out), the self cost of
# every function, counted to its crate (the first path segment of its name, the type's crate for `<T as Trait>`
# and for drop glue, as scripts/size_by_crate.py counts bytes), the run without calls subtracted, divided by N.
# Tells which crates a relayed call runs in, so the ones kept at opt-level 3 in the `dist` profile are chosen by
# measurement.
#
#   python3 benches/callgrind_crates.py N [TOP]
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_CRATE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::")


def crate_of(fn):
    fn = fn.strip()
    if fn.startswith("<"):
        m = PATH_CRATE.search(fn.replace("impl ", ""))
        return m.group(1) if m else "(impl on a primitive type)"
    if fn.startswith(("core::ptr::drop_in_place", "alloc::ptr::drop_in_place")):
        m = PATH_CRATE.search(fn[fn.index("<") + 1:]) if "<" in fn else None
        return m.group(1) if m else "core"
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", fn)
    if m:
        return m.group(1)
    if re.match(r"(sqlite3|fts5|vdbe|btree|pager)", fn, re.I):
        return "libsqlite3_sys (C)"
    if re.match(r"_?mi_", fn):
        return "mimalloc (C)"
    return "(C, libc or unnamed: " + fn.split("'")[0][:40] + ")"


def by_crate(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", path],
                         capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([ \d.]+%\)\s+)?(?:\S*?:)?(.+?)(?: \[.*\])?$", line)
        if not m or ":" not in line:
            continue
        counts[crate_of(m.group(2))] += int(m.group(1).replace(",", ""))
    return counts


def main(argv):
    n = int(argv[0])
    top = int(argv[1]) if len(argv) > 1 else 25
    with_calls = by_crate(os.path.join(ROOT, "target", f"callgrind-proxy-{n}.out"))
    without = by_crate(os.path.join(ROOT, "target", "callgrind-proxy-0.out"))
    per_call = {c: (with_calls[c] - without.get(c, 0)) / n for c in with_calls}
    total = sum(v for v in per_call.values())
    print(f"{'crate':45} {'instr/call':>11} {'share':>6}")
    for c, v in sorted(per_call.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{c:45} {v:11.0f} {100 * v / total:5.1f}%")
    print(f"{'total':45} {total:11.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
