#!/usr/bin/env python3
"""Where a binary's bytes go, by crate: the sizes of its symbols (`nm -S`, an unstripped build) summed per crate.

    python3 scripts/size_by_crate.py BINARY [--top N] [--symbols N] [--markdown]

A Rust symbol (legacy mangling, `_ZN...`) is counted to the crate of its first path segment; for an impl block
(`<T as Trait>::f`, `<impl T>::f`) the crate of the first type inside it, as cargo-bloat does. Generic code
belongs to the crate that defines it, wherever it was instantiated. C symbols are counted by prefix: aws-lc
(`aws_lc_*`, its assembly kernels and tables), SQLite (`sqlite3*`), QuickJS (`JS_*`, `js_*`, ...), mimalloc
(`mi_*`), musl's libc (what is left in a static build). Symbols with no size (assembly labels) are not counted, and
code inlined into a caller counts to the caller: with fat LTO a crate's own figure is what was left out of line.
"""
import argparse
import collections
import re
import subprocess
import sys

C_PREFIXES = [
    ("aws-lc-sys (C)", re.compile(r"^(aws_lc_|AWSLC_|_?bcm_|BORINGSSL_|ecp_nistz256|p521_|p384_|p256_|curve25519_|"
                                  r"edwards25519_|x25519_|ed25519_|sha\d+_block|aes_|aesni_|gcm_|ChaCha20|chacha20_|"
                                  r"poly1305_|bignum_|k25519|md5_block|rsaz_|bn_|OPENSSL_|CRYPTO_|EVP_|kOpenSSL)")),
    ("libsqlite3-sys (C)", re.compile(r"^(sqlite3|_?sqlite|fts5|Fts5|fts3|rtree|json|zero|yy|aSyntax|aKeyword|"
                                      r"vdbe|btree|pager|pcache|walIndex|unixIo|posixIo)", re.I)),
    ("rquickjs-sys (C, QuickJS)", re.compile(r"^(JS_|js_|__JS_|lre_|libregexp|libunicode|unicode_|cr_|dbuf_|"
                                             r"qjs|quickjs|bf_|mp_|atom_|free_function_bytecode|"
                                             r"lre|char_range|case_conv|re_|ident_realloc)")),
    ("mimalloc (C)", re.compile(r"^(_?mi_|_mi_)")),
]

LEGACY = re.compile(r"^_ZN")


def legacy_segments(sym):
    """The identifiers of a legacy-mangled Rust path (`_ZN3foo3bar17h...E`)."""
    i, out = 3, []
    while i < len(sym) and sym[i].isdigit():
        j = i
        while j < len(sym) and sym[j].isdigit():
            j += 1
        n = int(sym[i:j])
        out.append(sym[j:j + n])
        i = j + n
    return out


ESCAPES = [("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$RF$", "&"), ("$BP$", "*"), ("$C$", ","),
           ("$u7b$", "{"), ("$u7d$", "}"), ("$u5b$", "["), ("$u5d$", "]"), ("$u27$", "'"), ("..", "::")]
PATH_CRATE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)::")


def decode(segment):
    for a, b in ESCAPES:
        segment = segment.replace(a, b)
    return segment


def first_crate(text):
    m = PATH_CRATE.search(text.replace("impl ", ""))
    return m.group(1) if m else None


def crate_of(sym):
    if sym.startswith("_R"):  # v0 mangling (the standard library): the first crate root `C<hash>_<len><name>`
        m = re.search(r"C(?:s[0-9A-Za-z]*_)?(\d+)([A-Za-z_])", sym)
        if m:
            n = int(m.group(1))
            return sym[m.start(2): m.start(2) + n]
        return "(other: libc, compiler builtins, unnamed C)"
    if LEGACY.match(sym):
        segs = legacy_segments(sym)
        if not segs:
            return "(other: libc, compiler builtins, unnamed C)"
        first = decode(segs[0])
        if first.startswith("_<") or first.startswith("<"):
            # <impl T> or <A as B>: the crate of the first path inside (cargo-bloat's rule)
            return first_crate(first) or "(impl on a primitive type)"
        if first in ("core", "alloc", "std") and len(segs) > 2 and segs[1] == "ptr" and "drop_in_place" in segs[2]:
            # drop glue: counted to the crate of the type it drops
            return first_crate(decode(segs[2])) or first
        return first
    if sym.startswith("L") or sym.startswith("k"):  # aws-lc's assembly labels and tables
        return "aws-lc-sys (C)"
    for name, pat in C_PREFIXES:
        if pat.match(sym):
            return name
    return "(other: libc, compiler builtins, unnamed C)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--symbols", type=int, default=0, help="also list the N largest symbols")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    out = subprocess.run(["nm", "-S", "--size-sort", a.binary], capture_output=True, text=True, check=True).stdout
    by_crate = collections.Counter()
    by_section = collections.Counter()
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        _addr, size, kind, name = parts
        size = int(size, 16)
        if kind in "bB":  # .bss takes no bytes in the file
            continue
        sec = "code" if kind in "tTwW" else "data"
        crate = crate_of(name).replace("-", "_")
        by_crate[crate] += size
        by_section[(crate, sec)] += size
        syms.append((size, crate, name))
    total = sum(by_crate.values())
    # section sizes for context
    sizes = subprocess.run(["size", "-A", a.binary], capture_output=True, text=True, check=True).stdout
    file_total = 0
    for line in sizes.splitlines():
        p = line.split()
        if len(p) >= 2 and p[0].startswith(".") and p[1].isdigit() and p[0] not in (".bss", ".tbss"):
            file_total += int(p[1])
    mb = lambda n: f"{n / 1e6:.2f}"
    if a.markdown:
        print("| crate | code MB | data MB | total MB | share |")
        print("|---|---:|---:|---:|---:|")
    else:
        print(f"{'crate':40} {'code MB':>8} {'data MB':>8} {'total':>8} {'share':>6}")
    rest = 0
    for i, (crate, n) in enumerate(by_crate.most_common()):
        if i >= a.top:
            rest += n
            continue
        code, data = by_section[(crate, "code")], by_section[(crate, "data")]
        if a.markdown:
            print(f"| {crate} | {mb(code)} | {mb(data)} | {mb(n)} | {100 * n / total:.1f}% |")
        else:
            print(f"{crate:40} {mb(code):>8} {mb(data):>8} {mb(n):>8} {100 * n / total:5.1f}%")
    label = f"{len(by_crate) - a.top} other crates" if len(by_crate) > a.top else "none"
    if a.markdown:
        print(f"| ({label}) | | | {mb(rest)} | {100 * rest / total:.1f}% |")
        print(f"| **symbols counted** | | | **{mb(total)}** | of {mb(file_total)} MB in the file's sections |")
    else:
        print(f"({label}): {mb(rest)} MB; counted {mb(total)} MB of {mb(file_total)} MB in allocated sections")
    if a.symbols:
        print()
        for size, crate, name in sorted(syms, reverse=True)[: a.symbols]:
            print(f"{size:>9} {crate:30} {name[:150]}")


if __name__ == "__main__":
    sys.exit(main())
