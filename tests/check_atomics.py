#!/usr/bin/env python3
"""SPEC L7: one atomics vocabulary, with the memory order in every name.

Checks the core's sources (src/*.c, src/*.h):
  - no atomic primitive is used outside src/atomics.h: no __atomic_* or
    __sync_* builtin, no ck_pr_* call, no <stdatomic.h> (the test-only clock
    in src/clock.c, compiled only into the test build, is the exception);
  - every call of the vocabulary names its order: circuit__ld_*, _st_*,
    _cas_*, _faa_*, _ld128_*, _cas128_* all end in one of
    rlx / acq / rel / acq_rel / sc;
  - src/atomics.h uses the __atomic builtins for every 8-byte operation in
    every build (no TSan-only branch around them), so the TSan build runs the
    shipped code;
  - the build refuses an unknown CPU (#error in atomics.h).
Exit 0 when all hold, 1 with one line per violation. --self-test checks that
planted violations are found.
"""
import os
import re
import sys
import tempfile

ORDERS = ("rlx", "acq", "rel", "acq_rel", "sc")
CALL = re.compile(r"\bcircuit__(ld|st|cas|faa|ld128|cas128|ldp|stp)_([a-z_]+?)\s*\(")
RAW = re.compile(r"\b(__atomic_\w+|__sync_\w+|ck_pr_\w+)\s*\(|<stdatomic\.h>")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def check(src_dir):
    bad = []
    for name in sorted(os.listdir(src_dir)):
        if not name.endswith((".c", ".h")):
            continue
        path = os.path.join(src_dir, name)
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        if name == "atomics.h":
            body = text
            for fn in ("ld_rlx", "ld_acq", "st_rlx", "st_rel", "cas_rlx", "cas_acq_rel", "faa_rlx"):
                m = re.search(r"circuit__%s\s*\([^)]*\)\s*\{(.*?)\n\}" % fn, body, flags=re.S)
                if not m:
                    bad.append("%s: circuit__%s is not defined" % (name, fn))
                elif "__atomic_" not in m.group(1) or "#if" in m.group(1):
                    bad.append("%s: circuit__%s is not a plain __atomic builtin in every build"
                               % (name, fn))
            if "#error" not in body:
                bad.append("%s: no #error for an unknown CPU" % name)
            continue
        lines = text.split("\n")
        testing = False
        for no, line in enumerate(lines, 1):
            if re.match(r"\s*#\s*(ifdef|if defined\()\s*\(?CIRCUIT_TESTING", line) or \
               re.match(r"\s*#\s*else", line) and name == "clock.c":
                testing = True
            for m in RAW.finditer(line):
                if not (name == "clock.c" and testing):
                    bad.append("%s:%d: raw atomic primitive outside src/atomics.h: %s"
                               % (name, no, m.group(0).strip()))
            for call in CALL.finditer(line):
                order = call.group(2)
                if not any(order == o or order.endswith("_" + o) for o in ORDERS):
                    bad.append("%s:%d: circuit__%s_%s names no memory order"
                               % (name, no, call.group(1), order))
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "atomics.h"), "w") as f:
            f.write("#error x\n" + "".join(
                "static inline int circuit__%s(int *p)\n{\n    return __atomic_load_n(p, 0);\n}\n"
                % fn for fn in ("ld_rlx", "ld_acq", "st_rlx", "st_rel", "cas_rlx",
                                "cas_acq_rel", "faa_rlx")))
        with open(os.path.join(d, "a.c"), "w") as f:
            f.write("void f(void) { x = __atomic_load_n(&y, 0); circuit__cas_weird(&z); "
                    "circuit__ld_acq(&w); ck_pr_load_64(&v); }\n")
        found = check(d)
        want = ["raw atomic primitive outside src/atomics.h: __atomic_load_n(",
                "circuit__cas_weird names no memory order",
                "raw atomic primitive outside src/atomics.h: ck_pr_load_64("]
        missing = [w for w in want if not any(w in b for b in found)]
        extra = [b for b in found if "ld_acq" in b]
        if missing or extra:
            print("self-test: missing %s, unexpected %s" % (missing, extra))
            return 1
    print("self-test: planted violations found")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else "."
    bad = check(os.path.join(root, "src"))
    for b in bad:
        print("L7: " + b)
    print("L7: atomics vocabulary: %s" % ("%d violation(s)" % len(bad) if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
